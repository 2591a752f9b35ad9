"""The test guest as the paging tests run it: its /init's first part,
and the host's libvirtd to run it as a domain."""

from oslo_utils import importutils

from memcanal.tests.functional import services

libvirt = importutils.try_import('libvirt')

# What every /pagecheck init starts with: busybox set up, then DATA_MB of
# random data in a tmpfs, its md5sum noted and said on the console. The
# tests append what the guest does next (check once, or loop).
WRITE_DATA = b'''#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev
mkdir -p /data
mount -t tmpfs -o size=%dm tmpfs /data
dd if=/dev/urandom of=/data/pattern bs=1M count=%d 2>/dev/null
md5sum /data/pattern > /pattern.md5
echo "pagecheck: written $(cat /pattern.md5)"
'''


def writes_data(data_mb):
    """The start of a /pagecheck init writing ``data_mb`` MiB of data
    (its tmpfs 8 MiB larger, for the file system's own)."""
    return WRITE_DATA % (data_mb + 8, data_mb)


def hot_loop_and_checks(hot_mb):
    """The end of a /pagecheck init: a ``hot_mb`` MiB array written and
    read for ever in the background (wsswork), and a check of the data
    at each line on the console ("pagecheck: ok" or "BAD")."""
    return b'''/bin/wsswork %d RWRW 1000000 &
while read command; do
    if md5sum -c /pattern.md5; then
        echo "pagecheck: ok"
    else
        echo "pagecheck: BAD"
    fi
done
''' % hot_mb


def libvirt_connection():
    """Yield a connection to the host's libvirtd (qemu:///system); close
    it after. Without libvirt-python or libvirtd the test skips (fails
    under MEMCANAL_REQUIRE_SERVICES)."""
    if libvirt is None:
        services.missing('libvirt-python is not installed '
                         '(tools/install-libvirt.sh)')
    libvirt.registerErrorHandler(lambda _ctx, _error: None, None)
    try:
        connection = libvirt.open('qemu:///system')
    except libvirt.libvirtError as error:
        services.missing('libvirtd is not reachable (tools/install-'
                         'libvirt.sh): %s' % error)
    yield connection
    connection.close()
