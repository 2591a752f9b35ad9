"""The parsing in memcanal/tests/functional/xen_host.py of what
memcanal-logdirty prints in dom0 and memcanal-writer in the guest."""

from memcanal.tests.functional import xen_host

LOGDIRTY = '''memcanal-logdirty: a warning on stderr
{"interval": 0, "start_ns": 10, "end_ns": 20, "dirty": 5, \
"pfns": [[100, 3], [200, 2]], "cost_ns": 700, "pages": 65536}
{"interval": 1, "start_ns": 20, "end_ns": 30, "dirty": 0, "pfns": [], \
"cost_ns": 300, "pages": 65536}
'''
CONSOLE = '''[    0.000000] Linux version 6.1.0
memcanal-domu: ready writer=16:20:10
writer: pages=4 pfns=[[100, 3], [105, 1]]
writer: writing
writer: wrote passes=9 ns=20000 longest_ns=3000
'''


def test_logdirty_lines():
    intervals = xen_host.parse_logdirty(LOGDIRTY)
    assert [i['interval'] for i in intervals] == [0, 1]
    assert intervals[0]['frames'] == {100, 101, 102, 200, 201}
    assert intervals[0]['dirty'] == len(intervals[0]['frames'])
    assert intervals[1]['frames'] == set()


def test_writer_console():
    said = xen_host.parse_writer(CONSOLE)
    assert said['frames'] == {100, 101, 102, 105}
    assert said['writing'] and not said['idle'] and not said['done']
    assert said['passes'] == 9
    assert said['longest_s'] == 3e-6


def test_writer_console_before_it_starts():
    said = xen_host.parse_writer('memcanal-domu: ready writer=\n')
    assert said == {'frames': None, 'writing': False, 'idle': False,
                    'done': False, 'passes': None, 'longest_s': None}


def test_classify():
    written = {100, 101, 102}
    intervals = [{'frames': {100, 101, 102, 7}}, {'frames': {101, 8, 9}},
                 {'frames': {7}}, {'frames': set()}]
    assert xen_host.classify(intervals, written) == [
        ('all', 1), ('some', 2), ('none', 1), ('none', 0)]


def test_dommemstat():
    assert xen_host.parse_dommemstat(
        'actual 131136\navailable 262144\n\n') == {
            'actual': 131136, 'available': 262144}


def test_pvh_domain_xml():
    xml = xen_host.pvh_domain_xml('lv1', 256, (16, 20, 10))
    assert "<type arch='x86_64' machine='xenpvh'>xenpvh</type>" in xml
    assert "<memory unit='MiB'>256</memory>" in xml
    assert "<currentMemory unit='MiB'>256</currentMemory>" in xml
    assert ('<cmdline>console=hvc0 memcanal.writer=16:20:10</cmdline>'
            in xml)


def test_qemu_shares_the_host_root_and_a_network():
    host = xen_host.XenHost(work_dir='/nonexistent',
                            forwards=[(16509, 16509)])
    line = ' '.join(host.command_line('/nonexistent/control.sock'))
    assert ('-virtfs local,path=/,mount_tag=hostroot,security_model=none,'
            'readonly=on' in line)
    assert 'hostfwd=tcp:127.0.0.1:16509-:16509' in line
    host = xen_host.XenHost(work_dir='/nonexistent', host_root=False)
    assert '-virtfs' not in host.command_line('/nonexistent/control.sock')
