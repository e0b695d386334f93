# Issue 18 spike: does the git branch or the pause before a prompt mark a labelled task boundary?
# Run: python3 branch_and_gap.py (needs zstd). Findings: FINDINGS.md beside it.
import json, subprocess, glob, os, re
tot_b=0; tot_chg=0; chg_at_b=0
for lab in sorted(glob.glob('/work/main/tests/it/fixtures/labelled/*.labels')):
    jf = lab[:-7]+'.jsonl.zst'
    rows=[l for l in subprocess.run(['zstd','-dc',jf],capture_output=True,text=True).stdout.splitlines() if l.strip()]
    ents=[json.loads(r) for r in rows]
    labels=[]
    for line in open(lab):
        m=re.match(r'^(\d+)\s+(\S+)\s+\|\s?(.*)$',line.rstrip('\n'))
        if m: labels.append((int(m.group(1)),m.group(2),m.group(3)))
    # find user prompt entries by prefix
    prompts=[]
    for i,e in enumerate(ents):
        if e.get('type')!='user': continue
        c=e.get('message',{}).get('content')
        if isinstance(c,str): t=c
        elif isinstance(c,list):
            ts=[b.get('text','') for b in c if isinstance(b,dict) and b.get('type')=='text']
            if not ts: continue
            t=ts[0]
        else: continue
        prompts.append((i,t))
    idx=[]
    pi=0
    for n,task,pre in labels:
        pre=pre.strip()[:30]
        while pi<len(prompts) and not prompts[pi][1].strip().startswith(pre[:20]):
            pi+=1
        if pi>=len(prompts): idx.append(None); continue
        idx.append(prompts[pi][0]); pi+=1
    if None in idx: print(os.path.basename(lab),'unmatched',idx.count(None)); 
    # branch at start of each turn (the prompt entry) and at end (last entry before next prompt)
    def br_at(i):
        return ents[i].get('gitBranch') if i is not None else None
    out=[]
    for k,(n,task,pre) in enumerate(labels):
        i=idx[k]
        j=idx[k+1] if k+1<len(idx) and idx[k+1] is not None else len(ents)
        end=None
        if i is not None:
            for e in ents[i:j]:
                if e.get('gitBranch'): end=e['gitBranch']
        out.append((task,br_at(i),end))
    s=[]
    for k in range(1,len(out)):
        b = out[k][0]!=out[k-1][0]
        chg = out[k][2]!=out[k-1][2] and out[k][2] and out[k-1][2] and 'HEAD' not in (out[k][2],out[k-1][2])
        tot_b+=b; tot_chg+=bool(chg); chg_at_b+= bool(b and chg)
        s.append(('B' if b else '.')+('*' if chg else ' '))
    print(os.path.basename(lab)[:32].ljust(32),' '.join(s))
print('boundaries',tot_b,'branch changes (end-of-turn)',tot_chg,'at boundaries',chg_at_b)

# time gaps
import datetime
def ts(e):
    t=e.get('timestamp')
    if not t: return None
    return datetime.datetime.fromisoformat(t.replace('Z','+00:00')).timestamp()
gb=[];gn=[]
for lab in sorted(glob.glob('/work/main/tests/it/fixtures/labelled/*.labels')):
    jf = lab[:-7]+'.jsonl.zst'
    ents=[json.loads(r) for r in subprocess.run(['zstd','-dc',jf],capture_output=True,text=True).stdout.splitlines() if r.strip()]
    labels=[]
    for line in open(lab):
        m=re.match(r'^(\d+)\s+(\S+)\s+\|\s?(.*)$',line.rstrip('\n'))
        if m: labels.append((int(m.group(1)),m.group(2),m.group(3)))
    prompts=[]
    for i,e in enumerate(ents):
        if e.get('type')!='user': continue
        c=e.get('message',{}).get('content')
        if isinstance(c,str): t=c
        elif isinstance(c,list):
            ts_=[b.get('text','') for b in c if isinstance(b,dict) and b.get('type')=='text']
            if not ts_: continue
            t=ts_[0]
        else: continue
        prompts.append((i,t))
    idx=[];pi=0
    for n,task,pre in labels:
        pre=pre.strip()[:20]
        while pi<len(prompts) and not prompts[pi][1].strip().startswith(pre): pi+=1
        if pi>=len(prompts): idx.append(None); continue
        idx.append(prompts[pi][0]); pi+=1
    for k in range(1,len(labels)):
        if idx[k] is None or idx[k-1] is None: continue
        t1=ts(ents[idx[k]])
        prev=[ts(e) for e in ents[idx[k-1]:idx[k]] if ts(e)]
        if t1 is None or not prev: continue
        gap=(t1-max(prev))/60
        (gb if labels[k][1]!=labels[k-1][1] else gn).append(round(gap,1))
print('gaps at boundaries (min):',sorted(gb))
print('gaps elsewhere (min):',sorted(gn))
