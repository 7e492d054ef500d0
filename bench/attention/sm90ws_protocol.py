#!/usr/bin/env python3
"""A model of the warp-specialized Hopper prefill kernel's synchronization (kernels/attention/
attention_prefill_sm90_ws.cuh), one-tile and persistent (v25): the producer warpgroup and each
consumer warpgroup are agents; mbarriers count arrivals per phase (full: the producer's 128
threads as one unit; empty: each consumer warpgroup as one unit), named barriers count 2 units
(256 threads). Each agent mirrors the kernel's sequence of waits and arrivals with the same
index arithmetic. Random interleavings; reports a deadlock (every unfinished agent blocked), a
wait that passes on a phase other than the one it means (parity aliasing), or a barrier left
mid-phase at the end (a turn handed over that nobody took).

  python3 bench/attention/sm90ws_protocol.py [SEED]          # ~1 min, 400 random shapes
  python3 bench/attention/sm90ws_protocol.py --check-model   # must find v25's first bug

What it leaves out: data (the GEMMs, the softmax, what a copy writes), the wgmma wait_groups
(local to a warpgroup), and the copies' own latency (a TMA tile's bytes land at once; a
cp.async group is signalled where the kernel's issued / flush signal it). It mirrors the code
by hand: a change to the kernel's waits, arrivals or index arithmetic is made here too, and the
model run before the GPU call (CONTRIBUTING.md). The persistent walks, by the call's keys as
the launcher picks them (v30, bench/attention/NOTES.md): at most 512 keys v25's static walk
(each role of a CTA computes its rotated rounds itself), else v26's counter walk (tiles taken
from a device-wide counter and handed to the consumers through a slot of each Q buffer; the
model draws each CTA's takes at random and checks that every read of a slot finds the tile
written for it)."""
import math, random, sys

S = 2  # kStages
BN = 128

class Bar:
    def __init__(s, expect): s.expect, s.count, s.phases = expect, 0, 0
    def arrive(s):
        s.count += 1
        if s.count == s.expect: s.count, s.phases = 0, s.phases + 1

class NBar:
    def __init__(s): s.count, s.gen = 0, 0
    def arrive(s):
        s.count += 1
        if s.count == 2: s.count, s.gen = 0, s.gen + 1

def geometry(l, rb, heads, q_lens, kv_lens, bm, causal, window):
    m_block = rb - 1 - l % rb
    head = (l // rb) % heads
    seq = l // rb // heads
    q_len, kv_len = q_lens[seq], kv_lens[seq]
    m_base = m_block * bm
    rows = min(bm, q_len - m_base)
    q_offset = kv_len - q_len
    n_end = min(kv_len, q_offset + m_base + rows) if causal else kv_len
    w = window if window > 0 else 1 << 30
    window_start = max(0, q_offset + m_base - w + 1)
    first_tile = window_start // BN
    num_tiles = max(0, (n_end + BN - 1) // BN - first_tile)
    return dict(m_base=m_base, q_len=q_len, kv_len=kv_len, q_offset=q_offset,
                first_tile=first_tile, num_tiles=num_tiles, window_start=window_start)

def run(W, persistent, q_lens, kv_lens, heads, causal, window, grid_sms, cta, rng,
        release_last_v=True):
    bm = 64 * W
    rb = max(1, math.ceil(max(q_lens) / bm))
    T = rb * heads * len(q_lens)
    G = min(T, grid_sms) if persistent else T
    # v26: the persistent CTA takes tiles from a device-wide counter; which ones it gets
    # depends on the other CTAs, so the model draws them: each tile of the list with
    # probability 1 / G (at least one take per CTA is past the list's end: the -1 that ends it).
    taken = sorted(l for l in range(T) if rng.random() < 1.0 / G) if persistent else [cta]
    # v30: the static walk on calls of at most 512 keys (attention_prefill.cu,
    # hopper_persistent_walk): round k's tile k G + (cta + k) mod G, none past the list's end.
    static = persistent and max(kv_lens) <= 512
    counter = persistent and not static
    def static_walk():
        for k in range(math.ceil(T / G)):
            l = k * G + (cta + k) % G
            if l < T: yield l
    def has_rows(g): return g['m_base'] < g['q_len'] and g['num_tiles'] > 0
    slot = {}  # Q buffer b's tile slot: (the walk's tile round written for, list index or -1)
    bars = {}
    def bar(name, expect):
        if name not in bars: bars[name] = Bar(expect)
        return bars[name]
    full = lambda n: bar(n, 1)
    empty = lambda n: bar(n, W)
    nb = {i: NBar() for i in range(1, W + 1)}

    def producer():
        # cp.async group signalling: issued / flush as in the kernel
        state = {'prev': None}
        def issued(b):
            if state['prev'] is not None: yield ('arrive', state['prev'])
            state['prev'] = b
        def flush():
            if state['prev'] is not None:
                yield ('arrive', state['prev'])
                state['prev'] = None
        ring = q_round = 0
        takes = iter(taken)
        walk = static_walk()
        while True:
            qb = q_round & 1
            if static:
                l = next((t for t in walk if has_rows(
                    geometry(t, rb, heads, q_lens, kv_lens, bm, causal, window))), -1)
                if l < 0: break
                if q_round >= 2:
                    yield ('wait', f'q_empty{qb}', W, (q_round - 2) >> 1)
            elif counter:
                if q_round >= 2:
                    yield ('wait', f'q_empty{qb}', W, (q_round - 2) >> 1)
                l = next((t for t in takes if has_rows(
                    geometry(t, rb, heads, q_lens, kv_lens, bm, causal, window))), -1)
                yield ('write', qb, q_round, l)
                yield ('arrive', f'id_full{qb}')
                if l < 0: break
            else:
                l = cta
            g = geometry(l, rb, heads, q_lens, kv_lens, bm, causal, window)
            if not persistent and (g['m_base'] >= g['q_len'] or g['num_tiles'] == 0):
                return
            def tma_tile(t):
                key0 = (g['first_tile'] + t) * BN
                return key0 + 64 > g['window_start'] and key0 + BN <= g['kv_len']
            def load_kv(t, b):
                if tma_tile(t):
                    yield from flush()
                    yield ('arrive', b)
                else:
                    yield from issued(b)
            yield from issued(f'q_full{qb}')
            def load_k(t):
                j = ring + t; s = j % S
                if j >= S: yield ('wait', f'k_empty{s}', W, j // S - 1)
                yield from load_kv(t, f'k_full{s}')
            yield from load_k(0)
            for t in range(1, g['num_tiles'] + 1):
                if t < g['num_tiles']: yield from load_k(t)
                j = ring + t - 1; s = j % S
                if j >= S: yield ('wait', f'v_empty{s}', W, j // S - 1)
                yield from load_kv(t - 1, f'v_full{s}')
            ring += g['num_tiles']; q_round += 1
            if not persistent: break
        yield from flush()

    def consumer(w):
        ring = q_round = 0
        # The walk runs the turns on across its tiles: one pre-arrive before it, every region
        # hands over, warpgroup 0 takes the last hand-over after it (one-tile: per tile).
        if persistent and w == W - 1: yield ('narrive', 1)
        walk = static_walk()
        while True:
            if static:
                # (as the kernel: the consumers skip only the tiles without rows)
                l = next((t for t in walk if geometry(t, rb, heads, q_lens, kv_lens, bm, causal,
                                                      window)['m_base'] < q_lens[t // rb // heads]), -1)
                if l < 0: break
            elif counter:
                yield ('wait', f'id_full{q_round & 1}', 1, q_round >> 1)
                l = yield ('read', q_round & 1, q_round)
                if l < 0: break
            else:
                l = cta
            g = geometry(l, rb, heads, q_lens, kv_lens, bm, causal, window)
            if not persistent and g['m_base'] >= g['q_len']: return
            nt = g['num_tiles']
            # (A warpgroup's own tile count, my_tiles in the kernel, decides only which GEMMs
            # it issues: every branch on it waits, takes its turn and arrives alike.)
            qb = q_round & 1
            def end_turn(last):
                if persistent or not (w == W - 1 and last): return [('narrive', 1 + (w + 1) % W)]
                return []
            if nt > 0:
                if not persistent and w == W - 1: yield ('narrive', 1)
                yield ('wait', f'q_full{qb}', 1, q_round >> 1)
                yield ('wait', f'k_full{ring % S}', 1, ring // S)
                yield ('nsync', 1 + w)
                yield from end_turn(False)
                yield ('arrive', f'k_empty{ring % S}')
            for n in range(1, nt):
                jk, jv = ring + n, ring + n - 1
                yield ('wait', f'k_full{jk % S}', 1, jk // S)
                yield ('wait', f'v_full{jv % S}', 1, jv // S)
                yield ('nsync', 1 + w)
                yield from end_turn(False)
                yield ('arrive', f'k_empty{jk % S}')
                yield ('arrive', f'v_empty{jv % S}')
            if nt > 0:
                jv = ring + nt - 1
                yield ('wait', f'v_full{jv % S}', 1, jv // S)
                yield ('nsync', 1 + w)
                yield from end_turn(True)
                if persistent and release_last_v: yield ('arrive', f'v_empty{jv % S}')
            if persistent and nt > 0: yield ('arrive', f'q_empty{qb}')
            ring += nt; q_round += 1 if nt > 0 else 0
            if not persistent: break
        if persistent and w == 0: yield ('nsync', 1)

    def getbar(name):
        if name.startswith(('q_full', 'k_full', 'v_full', 'id_full')): return full(name)
        return empty(name)
    agents = {'P': producer()}
    for w in range(W): agents[f'C{w}'] = consumer(w)
    pending = {a: None for a in agents}   # the action an agent is blocked on
    done = set()
    nsync_gen = {}
    sent = {}  # the value a read hands back to its agent
    def step(a):
        """Run agent a until it blocks or ends; return True if it made progress."""
        progressed = False
        while True:
            act = pending[a]
            if act is None:
                try: act = agents[a].send(sent.pop(a, None))
                except StopIteration:
                    done.add(a); return True
                pending[a] = act
            kind = act[0]
            if kind == 'write':
                slot[act[1]] = (act[2], act[3]); pending[a] = None; progressed = True
            elif kind == 'read':
                got = slot.get(act[1])
                if got is None or got[0] != act[2]:
                    raise AssertionError(f'{a} reads tile slot {act[1]} for tile round {act[2]}, '
                                         f'finds {got}')
                sent[a] = got[1]; pending[a] = None; progressed = True
            elif kind == 'arrive':
                getbar(act[1]).arrive(); pending[a] = None; progressed = True
            elif kind == 'narrive':
                nb[act[1]].arrive(); pending[a] = None; progressed = True
            elif kind == 'wait':
                b = getbar(act[1]); want = act[3]
                if (b.phases & 1) != (want & 1):
                    if b.phases != want + 1:
                        raise AssertionError(f'{a} passes {act[1]} at phase {b.phases - 1}, meant {want}')
                    pending[a] = None; progressed = True
                else:
                    return progressed
            elif kind == 'nsync':
                key = (a, act[1])
                if key not in nsync_gen:
                    nsync_gen[key] = nb[act[1]].gen
                    nb[act[1]].arrive(); progressed = True
                if nb[act[1]].gen > nsync_gen[key]:
                    del nsync_gen[key]; pending[a] = None; progressed = True
                else:
                    return progressed
            if rng.random() < 0.3: return progressed   # yield to another agent
    while len(done) < len(agents):
        live = [a for a in agents if a not in done]
        rng.shuffle(live)
        if not any(step(a) for a in live):
            return f'deadlock: ' + ', '.join(f'{a} on {pending[a]}' for a in live)
    # At the end every barrier is between phases: a named barrier left with arrivals (a turn
    # handed over that nobody took) or an mbarrier with a partial phase is a protocol error.
    left = [f'named {i}: {b.count}' for i, b in nb.items() if b.count] + \
           [f'{n}: {b.count}' for n, b in bars.items() if b.count]
    return 'unbalanced at exit: ' + ', '.join(left) if left else None

def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    # --check-model: the walk without the release of a tile's last V buffer (v25's first
    # build, which hung on the GPU) must deadlock here, or the model proves nothing.
    mutant = '--check-model' in sys.argv
    rng = random.Random(int(args[0]) if args else 1)
    cases = 0
    for it in range(400):
        W = rng.choice([2, 3])
        persistent = rng.random() < 0.8
        nseq = rng.randint(1, 5)
        q_lens = [rng.choice([1, 17, 64, 97, 128, 129, 192, 300, 512, 700, 1024, 1100]) for _ in range(nseq)]
        chunked = rng.random() < 0.5
        kv_lens = [q + (rng.choice([0, 17, 90, 600, 1500]) if chunked else 0) for q in q_lens]
        heads = rng.choice([1, 2, 4])
        causal = rng.random() < 0.6
        window = rng.choice([0, 0, 97, 300, 1100]) if causal else 0
        sms = rng.choice([1, 2, 3, 5, 132])
        rb = max(1, math.ceil(max(q_lens) / (64 * W)))
        T = rb * heads * nseq
        ctas = range(min(T, sms)) if persistent else range(T)
        for cta in ctas:
            r = run(W, persistent, q_lens, kv_lens, heads, causal, window, sms, cta, rng,
                    release_last_v=not mutant)
            cases += 1
            if r and mutant:
                print('ok: the model finds the known bug:', r)
                return 0
            if r:
                print('FAIL', dict(W=W, persistent=persistent, q=q_lens, kv=kv_lens, heads=heads,
                                   causal=causal, window=window, sms=sms, cta=cta), r)
                return 1
    if mutant:
        print('FAIL: the model did not find the known bug (no release of the last V)')
        return 1
    print(f'ok: {cases} CTAs simulated, no deadlock, every wait on the phase it means, '
          'every barrier balanced at the end')
    return 0

if __name__ == '__main__':
    sys.exit(main())
