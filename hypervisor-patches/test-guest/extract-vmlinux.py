"""extract-vmlinux.py BZIMAGE VMLINUX: the uncompressed kernel ELF inside
an x86 bzImage (XZ-compressed, as Debian builds it).

QEMU boots such an ELF directly through its PVH entry (CONFIG_PVH), with
no firmware and no decompression: under a plugin that sees every memory
reference, that takes the guest's boot from about 30 s to about 7 s.
"""
import lzma
import struct
import sys

SETUP_SECTS = 0x1f1      # boot protocol: sectors of real-mode setup code
PAYLOAD = 0x248          # payload_offset, payload_length (protocol 2.08+)


def extract(bzimage):
    setup_sectors = bzimage[SETUP_SECTS] or 4
    offset, length = struct.unpack_from('<II', bzimage, PAYLOAD)
    start = (setup_sectors + 1) * 512 + offset
    # The kernel's XZ stream has no end marker after its one block, which
    # lzma.decompress() insists on; a decompressor object does not.
    return lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(
        bzimage[start:start + length])


if __name__ == '__main__':
    with open(sys.argv[1], 'rb') as source:
        kernel = extract(source.read())
    if kernel[:4] != b'\x7fELF':
        sys.exit('extract-vmlinux: the payload is not an ELF kernel')
    with open(sys.argv[2], 'wb') as target:
        target.write(kernel)
