# Issue 18 spike: does a fresh TodoWrite list (no item completed) open a labelled task? Run: python3 fresh_todo.py
from labelled import sessions, turn_end

seen = {'B': [0, 0], '.': [0, 0]}
for name, ents, labels, idx in sessions():
    for k in range(1, len(labels)):
        if idx[k] is None:
            continue
        fresh = False
        for e in ents[idx[k]:turn_end(idx, k, len(ents))]:
            if e.get('type') != 'assistant':
                continue
            for b in e.get('message', {}).get('content', []) or []:
                if isinstance(b, dict) and b.get('type') == 'tool_use' and b.get('name') == 'TodoWrite':
                    todos = b.get('input', {}).get('todos', [])
                    fresh |= bool(todos) and not any(t.get('status') == 'completed' for t in todos)
        kind = 'B' if labels[k][1] != labels[k - 1][1] else '.'
        seen[kind][0] += 1
        seen[kind][1] += fresh
print('boundaries: %d, fresh todo lists at them: %d; other turns: %d, fresh at them: %d'
      % (seen['B'][0], seen['B'][1], seen['.'][0], seen['.'][1]))
