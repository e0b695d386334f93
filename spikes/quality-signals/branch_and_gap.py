# Issue 18 spike: does the git branch or the pause before a prompt mark a labelled task boundary?
# Run: python3 branch_and_gap.py (needs zstd). Findings: FINDINGS.md beside it.
import datetime
from labelled import sessions, turn_end


def ts(e):
    t = e.get('timestamp')
    return datetime.datetime.fromisoformat(t.replace('Z', '+00:00')).timestamp() if t else None


boundaries = changes = changes_at_boundaries = 0
gaps_at, gaps_else = [], []
for name, ents, labels, idx in sessions():
    ends = []
    for k in range(len(labels)):
        branch = None
        if idx[k] is not None:
            for e in ents[idx[k]:turn_end(idx, k, len(ents))]:
                branch = e.get('gitBranch') or branch
        ends.append(branch)
    row = []
    for k in range(1, len(labels)):
        b = labels[k][1] != labels[k - 1][1]
        c = bool(ends[k] and ends[k - 1] and ends[k] != ends[k - 1] and 'HEAD' not in (ends[k], ends[k - 1]))
        boundaries += b
        changes += c
        changes_at_boundaries += b and c
        row.append(('B' if b else '.') + ('*' if c else ' '))
        if idx[k] is None or idx[k - 1] is None:
            continue
        start = ts(ents[idx[k]])
        before = [ts(e) for e in ents[idx[k - 1]:idx[k]] if ts(e)]
        if start is not None and before:
            (gaps_at if b else gaps_else).append(round((start - max(before)) / 60, 1))
    print(name[:32].ljust(32), ' '.join(row))
print('boundaries', boundaries, 'branch changes (end-of-turn)', changes, 'at boundaries', changes_at_boundaries)
print('gaps at boundaries (min):', sorted(gaps_at))
print('gaps elsewhere (min):', sorted(gaps_else))
