import sys,struct,re,collections
pid=int(sys.argv[1])
syms=[]
for l in open('nm.txt'):
    f=l.split()
    if len(f)<4: continue
    try: addr=int(f[0],16); size=int(f[1])
    except: continue
    name=' '.join(f[3:])
    syms.append((addr,size,f[2],name))
def pkg(n):
    n=n.split('(')[0] if n.startswith('type:') else n
    m=re.match(r'^(?:type:\.?[a-z]*\.?)?\*?([\w\-\.~/]+?)\.[^/]*$',n)
    p=m.group(1) if m else n
    for pre in ['k8s.io/client-go','k8s.io/api','k8s.io/apimachinery','sigs.k8s.io/controller-runtime','github.com/envoyproxy/go-control-plane','google.golang.org/grpc','google.golang.org/protobuf','github.com/lbplane/lbplane','github.com/prometheus','golang.org/x','k8s.io/kube-openapi','sigs.k8s.io/structured-merge-diff','github.com/google/gnostic-models','github.com/cncf/xds','cel.dev','google.golang.org/genproto']:
        if p.startswith(pre): return pre
    if '/' not in p and '.' not in p: return 'std:'+p.split('.')[0]
    return p.split('/')[0]+'/'+'/'.join(p.split('/')[1:3])
maps=[l.split() for l in open(f'/proc/{pid}/maps')]
pm=open(f'/proc/{pid}/pagemap','rb')
import bisect
addrs=[s[0] for s in syms]
for m in maps:
    if len(m)<6 or 'lbplane' not in m[5] or m[1] not in ('r-xp','r--p'): continue
    lo,hi=[int(x,16) for x in m[0].split('-')]
    n=(hi-lo)//4096
    pm.seek(lo//4096*8); data=pm.read(n*8)
    res=collections.Counter(); total=collections.Counter()
    for s in syms:
        if lo<=s[0]<hi: total[pkg(s[3])]+=max(s[1],0)
    for i in range(n):
        if (struct.unpack_from('<Q',data,i*8)[0]>>63)&1==0: continue
        a=lo+i*4096
        j=bisect.bisect_right(addrs,a)-1
        while j < len(syms) and syms[j][0] < a+4096:
            s=syms[j]
            ov=min(s[0]+s[1],a+4096)-max(s[0],a)
            if ov>0: res[pkg(s[3])]+=ov
            j+=1
    print(m[0],m[1],'resident bytes by package (top 14), of the package total in this mapping:')
    for k,v in res.most_common(14): print(f'  {v/1048576:6.2f} MiB of {total[k]/1048576:6.2f}  {k}')
