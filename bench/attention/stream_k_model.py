#!/usr/bin/env python3
"""A model of the stream-K walk of the Hopper prefill (kernels/attention/
attention_prefill_sm90_walks.cuh: Sm90StreamK::item, and the merge loop of the kernel's
epilogue in attention_prefill_sm90_ws.cuh), run without a GPU. For a grid of G CTAs over T
tiles of at most U key tiles each (a tile's own count n <= U: a shorter sequence clips its
pieces), it checks that
  1. every tile's key tiles [0, n) are computed exactly once, over the pieces that survive the
     clip;
  2. the pieces a tile's first piece merges (the CTAs it waits for) are exactly that tile's
     other surviving pieces;
  3. a piece that publishes (not the tile's first keys) is its CTA's first item after the whole
     rounds, and a piece that merges is its CTA's last item: a CTA waits only after all its
     own publishing, on CTAs of higher index whose publishing piece runs before any wait of
     theirs, so with every CTA resident (one an SM, grid <= SMs) no wait can deadlock;
  4. each CTA publishes at most once a launch (one flag a CTA and warpgroup suffices).
Change the model with the kernel (CONTRIBUTING.md), and run it before a GPU call:

    python3 bench/attention/stream_k_model.py [CASES]
"""
import random
import sys


def walk(tiles, grid, units):
    """Each CTA's items (tile, kb0, kb1, in_tail), as Sm90StreamK::item yields them."""
    rounds = tiles // grid
    total = (tiles - rounds * grid) * units
    start = lambda c: total * c // grid
    out = []
    for c in range(grid):
        items, u, end = [], start(c), start(c + 1)
        for k in range(rounds):
            items.append((k * grid + (c + k) % grid, 0, units, False))
        while u < end:
            t = u // units
            kb0 = u - t * units
            kb1 = min(units, kb0 + (end - u))
            items.append((rounds * grid + t, kb0, kb1, True))
            u += kb1 - kb0
        out.append(items)
    return out, start, rounds


def check(tiles, grid, units, n_of):
    """Raises AssertionError naming the broken property; n_of(tile) = the tile's key tiles."""
    items, start, rounds = walk(tiles, grid, units)
    seen = {}
    publishers, mergers = {}, {}
    for c, its in enumerate(items):
        tail = [i for i, x in enumerate(its) if x[3]]
        published = 0
        for i, (l, kb0, kb1, in_tail) in enumerate(its):
            n = n_of(l)
            a, b = min(kb0, n), min(kb1, n)
            if b == a:
                continue  # clipped away (or a tile without keys): neither runs nor publishes
            for kt in range(a, b):
                assert (l, kt) not in seen, f"key tile {kt} of tile {l} twice (CTAs {seen[(l, kt)]}, {c})"
                seen[(l, kt)] = c
            if kb0 > 0:  # sk_rest: publishes
                assert in_tail and i == tail[0], f"CTA {c} publishes from item {i}, not its first tail item"
                published += 1
                publishers.setdefault(l, set()).add(c)
            elif kb1 < units:  # sk_first: merges the tile's other pieces
                assert in_tail and i == len(its) - 1, f"CTA {c} merges tile {l} before its last item"
                tile_end = (l - rounds * grid + 1) * units
                waits = set()
                c2 = c + 1
                while c2 < grid and start(c2) < tile_end:
                    s2 = start(c2)
                    if s2 < start(c2 + 1) and s2 - (tile_end - units) < n:
                        waits.add(c2)
                    c2 += 1
                mergers[l] = waits
        assert published <= 1, f"CTA {c} publishes {published} times"
    for l in range(tiles):
        for kt in range(n_of(l)):
            assert (l, kt) in seen, f"key tile {kt} of tile {l} never computed"
        assert mergers.get(l, set()) == publishers.get(l, set()), (
            f"tile {l}: merges {sorted(mergers.get(l, set()))}, published by {sorted(publishers.get(l, set()))}")


def main():
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rng = random.Random(50)
    fixed = [(144, 132, 9, None), (132, 132, 5, None), (2048, 132, 4, None), (2048, 132, 32, None),
             (24 * 6, 132, 6, lambda l: 3 if l % 6 >= 3 else 6)]
    for tiles, grid, units, n in fixed:
        check(tiles, grid, units, n or (lambda l, u=units: u))
    for _ in range(cases):
        grid = rng.randint(1, 132)
        tiles = rng.randint(grid, 6 * grid)
        units = rng.randint(1, 40)
        short = {l: rng.randint(0, units) for l in range(tiles) if rng.random() < 0.3}
        check(tiles, grid, units, lambda l: short.get(l, units))
    print(f"stream-K model: {len(fixed) + cases} cases, every property held")


if __name__ == "__main__":
    main()
