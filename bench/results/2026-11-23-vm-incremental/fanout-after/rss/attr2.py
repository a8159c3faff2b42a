import sys,struct,re,collections,bisect
pid=int(sys.argv[1])
syms=[]
for l in open('nm.txt'):
    f=l.split()
    if len(f)<4 or f[2] not in 'Tt': continue
    syms.append((int(f[0],16),int(f[1]),' '.join(f[3:])))
addrs=[s[0] for s in syms]
m=[l.split() for l in open(f'/proc/{pid}/maps') if 'r-xp' in l and 'lbplane' in l][0]
lo,hi=[int(x,16) for x in m[0].split('-')]
pm=open(f'/proc/{pid}/pagemap','rb'); pm.seek(lo//4096*8); data=pm.read((hi-lo)//4096*8)
blocks=set()
for i in range((hi-lo)//4096):
    if (struct.unpack_from('<Q',data,i*8)[0]>>63)&1: blocks.add((lo+i*4096)//65536)
# which functions are the (first) reason of each block: count blocks per package of functions named init / Register / addKnownTypes
per=collections.Counter(); kinds=collections.Counter(); api=set()
for b in blocks:
    a=b*65536; j=bisect.bisect_right(addrs,a)-1
    names=[]
    while j<len(syms) and syms[j][0]<a+65536:
        names.append(syms[j][2]); j+=1
    pk=collections.Counter()
    for n in names:
        mm=re.match(r'^([\w\-\.~/]+?)\.[^/]*$',n.split('(')[0]); pk[mm.group(1) if mm else n]+=1
    top=pk.most_common(1)[0][0] if pk else '?'
    if top.startswith('k8s.io/api/'): api.add(top)
    pre=top.split('/')[0]+'/'+top.split('/')[1] if '/' in top else 'std'
    per[pre]+=1
print('resident 64KiB text blocks:',len(blocks))
for k,v in per.most_common(12): print(f'  {v:4d} blocks  {k}')
print('k8s.io/api packages with a resident block:',len(api))
