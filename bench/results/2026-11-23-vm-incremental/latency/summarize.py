import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l)
        if r.get('scenario')=='fanout':
            e=r.get('extra',{})
            print(f.split('/')[-2], r['conns'], 'p50/p99/all %.0f/%.0f/%.0f ms'%(r['p50Ms'],r['p99Ms'],r['p999Ms']), 'first p50/all %.0f/%.0f'%(e.get('firstP50',0),e.get('firstAll',0)), 'cpu %.0f ms (%.0f us/client)'%(r['lbplaneCpuMsPerChange'],e.get('lbplaneCPUPerClientUs',0)),
              'r/w %.2f/%.2f'%(e.get('readSyscallsPerClient',0),e.get('writeSyscallsPerClient',0)), 'rss %.0f->%.0f MiB %.1f KiB/client'%(e.get('idleRSS',0)/2**20, r.get('lbplaneRssBytes',0)/2**20, e.get('rssPerClientKiB',0)),
              'got %d/%d'%(e.get('got',0),e.get('ready',0)), 'connect %.0fs'%e.get('connectSeconds',0), 'grpc' if e.get('grpcClients') else '', 'clients %.0f us each'%e.get('runnerCPUPerClientUs',-1), 'accepted %.0f ms'%e.get('acceptedMs',-1), r.get('note',''))
        elif r.get('scenario')=='propagation':
            ps=sorted(r.get('pushSamplesMs') or r.get('pushSamples') or [])
            print(f.split('/')[-2], r['policies'], 'accepted->200 p50/p99 %.1f/%.1f'%(r['p50Ms'],r['p99Ms']), 'cpu/change %.2f ms'%r['lbplaneCpuMsPerChange'], 'rss %d MiB'%(r.get('lbplaneRssBytes',0)>>20))
