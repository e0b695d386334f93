# Issue 18 spike: does a fresh TodoWrite list (no item completed) open a labelled task? Run: python3 fresh_todo.py
import json, subprocess, glob, os, re
def load(lab):
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
    return ents,labels,idx
tot={'B':[0,0],'.':[0,0]}
tools={}
for lab in sorted(glob.glob('/work/main/tests/it/fixtures/labelled/*.labels')):
    ents,labels,idx=load(lab)
    row=[]
    for k in range(len(labels)):
        if idx[k] is None: row.append('?'); continue
        j=next((x for x in idx[k+1:] if x is not None), len(ents))
        fresh=False
        for e in ents[idx[k]:j]:
            if e.get('type')!='assistant': continue
            for b in e.get('message',{}).get('content',[]) or []:
                if isinstance(b,dict) and b.get('type')=='tool_use':
                    tools[b.get('name')]=tools.get(b.get('name'),0)+1
                    if b.get('name') in ('TodoWrite',):
                        todos=b.get('input',{}).get('todos',[])
                        if todos and not any(t.get('status')=='completed' for t in todos):
                            fresh=True
                    if b.get('name') in ('EnterPlanMode','ExitPlanMode','Task'):
                        pass
        if k>0:
            bd='B' if labels[k][1]!=labels[k-1][1] else '.'
            tot[bd][0]+=1; tot[bd][1]+=fresh
            row.append(bd+('T' if fresh else ' '))
    print(os.path.basename(lab)[:30].ljust(30),' '.join(row))
print(tot)
print(sorted(tools.items(),key=lambda x:-x[1])[:25])
