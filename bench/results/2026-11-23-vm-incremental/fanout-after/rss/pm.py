import sys,struct
pid=int(sys.argv[1])
maps=[l.split() for l in open(f'/proc/{pid}/maps')]
pm=open(f'/proc/{pid}/pagemap','rb')
for m in maps:
    if len(m)<6 or 'lbplane' not in m[5]: continue
    lo,hi=[int(x,16) for x in m[0].split('-')]
    n=(hi-lo)//4096
    pm.seek(lo//4096*8); data=pm.read(n*8)
    present=[(struct.unpack_from('<Q',data,i*8)[0]>>63)&1 for i in range(n)]
    p=sum(present)
    blocks={}
    for i,b in enumerate(present):
        if b: blocks.setdefault((lo//4096+i)//16,0); blocks[(lo//4096+i)//16]+=1
    full=sum(1 for v in blocks.values() if v==16)
    print(m[0],m[1],f'pages {n} present {p} ({p*4/1024:.1f} MiB) in {len(blocks)} 64KiB blocks, {full} of them complete')
