#!/usr/bin/env python3
"""The sample order that DataTest.ShuffleOrderIsPortable (test/test_data.cpp) pins, computed independently of the C++
code: mt19937_64 written from its published definition (Matsumoto and Nishimura; the parameters the C++ standard
gives std::mt19937_64, [rand.predef]) and checked against the standard's required 10000th output, then splitmix64
(Steele, Lea and Flood 2014), the loader's seed mixing and a Fisher-Yates shuffle with a rejection-sampled bound,
as data/shuffle.h and data/dataloader.cpp document them.

    python3 test/reference/shuffle_order.py     prints the order of the test's 10 windows (seed 1234, one shard)
"""
MASK = (1 << 64) - 1


class MT19937_64:
    n, m, r = 312, 156, 31
    a = 0xB5026F5AA96619E9
    u, d = 29, 0x5555555555555555
    s, b = 17, 0x71D67FFFEDA60000
    t, c = 37, 0xFFF7EEE000000000
    l, f = 43, 6364136223846793005

    def __init__(self, seed=5489):
        self.x = [seed & MASK]
        for i in range(1, self.n):
            prev = self.x[-1]
            self.x.append((self.f * (prev ^ (prev >> 62)) + i) & MASK)
        self.i = self.n

    def __call__(self):
        if self.i >= self.n:
            upper, lower = (MASK << self.r) & MASK, (1 << self.r) - 1
            for k in range(self.n):
                y = (self.x[k] & upper) | (self.x[(k + 1) % self.n] & lower)
                self.x[k] = self.x[(k + self.m) % self.n] ^ (y >> 1) ^ (self.a if y & 1 else 0)
            self.i = 0
        y = self.x[self.i]
        self.i += 1
        y ^= (y >> self.u) & self.d
        y ^= (y << self.s) & self.b
        y ^= (y << self.t) & self.c
        return y ^ (y >> self.l)


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def mix_seed(state, stream):
    return splitmix64(state ^ splitmix64(stream))


def uniform_below(g, n):  # rejection: only multiples of n below 2^64
    limit = MASK - MASK % n
    while True:
        r = g()
        if r < limit:
            return r % n


def fisher_yates(v, seed):
    g = MT19937_64(seed)
    for i in range(len(v), 1, -1):
        j = uniform_below(g, i)
        v[i - 1], v[j] = v[j], v[i - 1]


def main():
    g = MT19937_64()
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042, "mt19937_64 does not meet the standard's 10000th-output requirement"
    # one shard (file 0) of 10 windows, seed 1234, first epoch: the windows in the shard's permutation, whose stream
    # is the file index + 1 (stream 0 orders the shards)
    perm = list(range(10))
    fisher_yates(perm, mix_seed(1234, 0 + 1))
    print(perm)


if __name__ == "__main__":
    main()
