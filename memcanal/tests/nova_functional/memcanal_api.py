"""memcanal's real REST API in a child process, for the nova tests.

memcanal registers its options ([api], [database], [libvirt]...) on
oslo.config's global CONF, as nova does, with different meanings, so the
two cannot share a process: the API runs here, on SQLite, with noauth2
(token ``admin``). The parent seeds it through this process's stdin, one
JSON command a line, each stored with memcanal.db.api as the service
stores what agents send:

    {"register": {"name": ..., "total": bytes, "reserved": bytes}}
        -> {"uuid": ...}
    {"report": <an agent report, "host" (a name) for "host_uuid">}
        -> {"stored": true}

Run as ``python memcanal_api.py DIR``; it
prints ``{"url": ...}`` once it serves, and stops when stdin closes.
"""

import contextlib
import json
import pathlib
import subprocess
import sys
import threading

TIMEOUT = 30
# Hosts stay up for the whole test: reports come only when the test
# sends them.
REPORT_INTERVAL = 3600.0


def _serve(directory):
    from wsgiref import simple_server

    from memcanal.api import deploy
    from memcanal import conf as memcanal_conf
    from memcanal import context
    from memcanal.db import api as db_api
    from memcanal.db import migration
    from memcanal.rpc import reports

    url = 'sqlite:///%s' % (directory / 'memcanal.sqlite')
    path = directory / 'memcanal.conf'
    path.write_text('[api]\nauth_strategy = noauth2\n'
                    '[database]\nconnection = %s\n' % url)
    conf = memcanal_conf.CONF
    conf(['--config-file', str(path)], project='memcanal',
         default_config_files=[])
    migration.upgrade(url)

    class Quiet(simple_server.WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server = simple_server.make_server('127.0.0.1', 0, deploy.loadapp(conf),
                                       handler_class=Quiet)
    threading.Thread(target=server.serve_forever, args=(0.05,),
                     daemon=True).start()
    print(json.dumps({'url': 'http://127.0.0.1:%d' % server.server_port}),
          flush=True)

    ctx = context.get_admin_context()
    hosts = {}
    for line in sys.stdin:
        command = json.loads(line)
        if 'register' in command:
            args = command['register']
            hosts[args['name']] = db_api.register_host(
                ctx, args['name'], args['total'], args['reserved'],
                REPORT_INTERVAL)['uuid']
            answer = {'uuid': hosts[args['name']]}
        else:
            report = dict(command['report'])
            report['host_uuid'] = hosts[report.pop('host')]
            report = reports.validate_report(report, max_mrc_points=100,
                                             max_instances=1000)
            answer = {'stored': bool(db_api.store_report(ctx, report))}
        print(json.dumps(answer), flush=True)
    server.shutdown()


class MemcanalAPI:
    """The child process: ``url``, ``register(...)``, ``report(...)``."""

    def __init__(self, directory):
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(directory)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._url = None
        self.sequences = {}

    @property
    def url(self):
        """Its base URL, once it serves (the process starts meanwhile)."""
        if self._url is None:
            self._url = self._answer()['url']
        return self._url

    def _answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError('memcanal API process exited with %s' %
                               self.process.wait(TIMEOUT))
        return json.loads(line)

    def _call(self, command):
        self.url  # noqa: B018  (its first line is the URL)
        self.process.stdin.write(json.dumps(command) + '\n')
        self.process.stdin.flush()
        return self._answer()

    def register(self, name, total, reserved):
        return self._call({'register': {'name': name, 'total': total,
                                        'reserved': reserved}})['uuid']

    def report(self, host, instances):
        """Store ``host``'s next report: ``instances`` as agent samples
        (uuid, project_id, allocated_bytes, flavor, wss...)."""
        sequence = self.sequences[host] = self.sequences.get(host, 0) + 1
        return self._call({'report': {
            'host': host, 'sequence': sequence,
            'collected_at': '2026-11-22T09:%02d:00Z' % (sequence % 60),
            'instances': instances}})['stored']

    def close(self):
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        self.process.wait(TIMEOUT)
        self.process.stdout.close()


if __name__ == '__main__':
    _serve(pathlib.Path(sys.argv[1]))
