"""The labelled real sessions of tests/it/fixtures/labelled, read for the issue-18 spikes."""
import glob, json, os, re, subprocess

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'tests', 'it', 'fixtures', 'labelled')


def sessions():
    """Each labelled session: (name, entries, labels [(turn, task, prompt head)], entry index of
    each labelled prompt or None when its prompt could not be matched by its first 20 chars)."""
    for lab in sorted(glob.glob(os.path.join(FIXTURES, '*.labels'))):
        jf = lab[:-7] + '.jsonl.zst'
        text = subprocess.run(['zstd', '-dc', jf], capture_output=True, text=True).stdout
        ents = [json.loads(r) for r in text.splitlines() if r.strip()]
        labels = []
        for line in open(lab):
            m = re.match(r'^(\d+)\s+(\S+)\s+\|\s?(.*)$', line.rstrip('\n'))
            if m:
                labels.append((int(m.group(1)), m.group(2), m.group(3)))
        prompts = []
        for i, e in enumerate(ents):
            if e.get('type') != 'user':
                continue
            c = e.get('message', {}).get('content')
            if isinstance(c, str):
                t = c
            elif isinstance(c, list):
                texts = [b.get('text', '') for b in c if isinstance(b, dict) and b.get('type') == 'text']
                if not texts:
                    continue
                t = texts[0]
            else:
                continue
            prompts.append((i, t))
        idx, pi = [], 0
        for _, _, pre in labels:
            pre = pre.strip()[:20]
            while pi < len(prompts) and not prompts[pi][1].strip().startswith(pre):
                pi += 1
            if pi >= len(prompts):
                idx.append(None)
                continue
            idx.append(prompts[pi][0])
            pi += 1
        yield os.path.basename(lab)[:-7], ents, labels, idx


def turn_end(idx, k, n_entries):
    """The entry index where labelled turn k's entries end (the next matched prompt)."""
    return next((x for x in idx[k + 1:] if x is not None), n_entries)
