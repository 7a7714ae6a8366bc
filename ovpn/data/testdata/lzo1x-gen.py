#!/usr/bin/python3
# Writes lzo1x-vectors.txt: inputs compressed by liblzo2 (Debian's
# python3-lzo, LZO1X-1 at level 1 as OpenVPN's comp-lzo uses, LZO1X-999
# at level 9). Each line: name level length sha256(plain) hex(compressed).
# Run: /usr/bin/python3 lzo1x-gen.py > lzo1x-vectors.txt
import hashlib, lzo

def lcg(n, seed):
    out, x = bytearray(), seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        out.append((x >> 16) & 0xff)
    return bytes(out)

ip = bytes.fromhex("450005dc1c4640004001b1e60a0800020a080001") + bytes.fromhex("0800f7ff00770001")
text = b"".join(b"The quick brown fox %d jumps over the lazy dog. " % i for i in range(40))
vectors = {
    "empty": b"",
    "one": b"x",
    "four": b"abcd",
    "zeros1400": bytes(1400),
    "ping-zeros": ip + bytes(1372),
    "ping-pattern": ip + b"\xde\xad\xbe\xef" * 343,
    "ab-overlap": b"ab" * 700,
    "text": text,
    "random600": lcg(600, 1),
    "random-then-repeat": lcg(300, 2) + bytes(50) + lcg(300, 2)[:200] + lcg(900, 3),
    "zeros10000": bytes(10000),
    "far17000": lcg(17000, 4) * 2,
    "far33000": lcg(33000, 5) + lcg(33000, 5)[:2000],
}
for name, plain in vectors.items():
    for level in (1, 9):
        c = lzo.compress(plain, level, False)
        assert lzo.decompress(c, False, len(plain)) == plain
        print(name, level, len(plain), hashlib.sha256(plain).hexdigest(), c.hex())
