"""Attackers on a real libvirt host cannot hand a domain's RAM over (#25).

The test guest runs as a domain of the real libvirtd
(test_libvirt_sampling's ``booted``: the agent listens on its pager
socket before it starts, its QEMU, run by libvirt as libvirt-qemu, hands
its RAM over, a pager samples it). Then, while it runs, attackers run
as nobody (test_handoff's actors, with the domain's ``-uuid`` on their
command line and a memfd and userfaultfd of their own) offer RAM for
it: one outside QEMU's group cannot even connect; one inside it (as a
compromised QEMU of another domain would be), claiming its own pid or
the domain's QEMU's, is refused. The domain's own handoff went through
every check, and its pager is the one it had.
"""

import grp
import os

from memcanal.agent.drivers import domain_pagers
from memcanal.agent.drivers import handoff_checks
from memcanal.agent import pager_client
from memcanal.tests.functional import test_libvirt_sampling as sampling
from memcanal.tests.unit.agent import test_handoff
from memcanal.tests.unit.agent.test_handoff import actors  # noqa: F401

pytestmark = sampling.pytestmark

# The domain and its agent as test_libvirt_sampling runs them.
conf = sampling.conf
scratch = sampling.scratch
connection = sampling.connection
files = sampling.files
memory_server = sampling.memory_server


def test_only_the_domains_qemu_hands_its_ram_over(conf, scratch,
                                                  connection, files,
                                                  actors):
    qemu_group = grp.getgrnam(conf.libvirt.qemu_group).gr_gid
    with sampling.booted(conf, scratch, connection, files,
                         'attacked') as host:
        path = os.path.join(scratch, 'attacked.sock')
        listener = host.hypervisor.pagers.listeners[path]
        pager = host.pager()
        qemu = pager.record.qemu[0]
        # QEMU runs as libvirt's user and group, and the socket is theirs
        # and root's alone, in a directory only root writes to.
        with open('/proc/%d/status' % qemu) as status:
            gids = next(line for line in status
                        if line.startswith('Gid:')).split()[1:]
        assert str(qemu_group) in gids, gids
        socket_status = os.stat(path)
        assert (socket_status.st_mode & 0o7777, socket_status.st_uid,
                socket_status.st_gid) == (0o660, 0, qemu_group)
        directory = os.stat(scratch)
        assert directory.st_uid == 0 and not directory.st_mode & 0o022
        # The domain's own handoff passed every check.
        assert (listener.accepted, listener.refused) == (1, {})

        outsider = actors(user=test_handoff.NOBODY,
                          group=test_handoff.NOGROUP, extra_groups=[],
                          uuid=host.uuid)
        assert outsider.command('idle %s 1' % path) == '0 EACCES'
        impostor = actors(user=test_handoff.NOBODY,
                          group=test_handoff.NOGROUP,
                          extra_groups=[qemu_group], uuid=host.uuid)
        for claimed in (impostor.pid, qemu):
            assert impostor.answer(impostor.offer(path, claimed)) == \
                'closed'
        assert listener.refused == {'not_qemu': 2}
        assert listener.held() == set()
        # The domain keeps its pager, attached to its QEMU.
        assert host.pager() is pager and pager.alive()
        hello = pager.client.command('hello')
        assert hello['pid'] == qemu and hello['attached']
        # libvirt wrote QEMU's pid file once its process was made: a
        # process that started after it is not that QEMU.
        _, written = domain_pagers.libvirt_qemus(
            conf.libvirt.qemu_run_dir)[qemu]
        started = handoff_checks.Peer(
            qemu, 0, 0, pager_client.start_time(qemu)).started_at()
        print('QEMU %d started %.3f s before libvirt wrote its pid file'
              % (qemu, written - started))
        assert started <= written + domain_pagers.PID_FILE_SLACK
