"""probe_source.py - for the phase probes: one variant's rendered source out
of `sparsetune generate --print`, and stage-cut markers inserted into it at
anchor texts that must occur exactly as often as expected (so a template
change fails the probe build instead of cutting the wrong place)."""


def extract(gen_path, name):
    """The source printed under the line `// ==== NAME ...`."""
    g = open(gen_path).read().split('\n')
    for i, line in enumerate(g):
        if line.startswith('// ==== ' + name + ' '):
            j = i + 1
            while j < len(g) and not g[j].startswith('// ==== '):
                j += 1
            return '\n'.join(g[i + 1:j])
    raise SystemExit('no variant ' + name)


def apply_marks(src, marks, tag):
    """marks: (anchor, expected count, rewrite of the anchor) triples."""
    for anchor, n, rewrite in marks:
        got = src.count(anchor)
        assert got == n, '%s: %d x %r (want %d)' % (tag, got, anchor, n)
        src = src.replace(anchor, rewrite(anchor))
    return src
