"""memcanal's service carrying out one migration decision through nova's
API, in a child process, for the nova tests.

For the reason memcanal_api.py gives (memcanal's and nova's options on
one global CONF), memcanal's service code cannot run in nova's test
process: this child opens the memcanal database the test's memcanal API
serves (its hosts and the VM's reports already stored there), records a
migration decision in auto mode and runs the service's ActionDispatcher,
as its periodic job does, until the decision has an outcome. nova is
reached from [nova] options alone, as an operator's memcanal.conf has
them: ``auth_type = none`` and the endpoint of nova's API, which the test
serves on a real port.

Run as ``python memcanal_service.py DIR NOVA_URL SERVER_UUID HOST``; it
prints ``{"decision": ..., "instance": ...}`` (memcanal.db's dicts, as
JSON) and exits.
"""

import json
import pathlib
import subprocess
import sys
import time

TIMEOUT = 30
POLL_INTERVAL = 0.1


def _migrate(directory, nova_url, server_uuid, destination):
    from memcanal import conf as memcanal_conf
    from memcanal import context
    from memcanal.db import api as db_api
    from memcanal.db import decisions
    from memcanal.service import actions

    path = directory / 'memcanal-service.conf'
    path.write_text(
        '[database]\nconnection = sqlite:///%s\n'
        '[migration]\nexecutor = nova\n'
        '[nova]\nauth_type = none\nendpoint_override = %s\n'
        % (directory / 'memcanal.sqlite', nova_url))
    conf = memcanal_conf.CONF
    conf(['--config-file', str(path)], project='memcanal',
         default_config_files=[])

    ctx = context.get_admin_context()
    [host_uuid] = [host['uuid'] for host in db_api.list_hosts(ctx)
                   if host['name'] == destination]
    decision = decisions.create_migration(ctx, server_uuid, host_uuid,
                                          'migration', 'auto', {}, {})
    dispatcher = actions.ActionDispatcher(conf)
    deadline = time.monotonic() + TIMEOUT
    # The service's periodic job (Manager.carry_out_decisions), run
    # until the decision leaves 'approved'.
    while (decision['state'] == 'approved'
           and time.monotonic() < deadline):
        dispatcher.fail_unanswered(ctx)
        dispatcher.send(ctx)
        decision = decisions.get_decision(ctx, decision['uuid'])
        time.sleep(POLL_INTERVAL)
    print(json.dumps({'decision': decision,
                      'instance': db_api.get_instance(ctx, server_uuid)},
                     default=str))


def migrate(directory, nova_url, server_uuid, destination):
    """Run the child; its JSON answer."""
    done = subprocess.run(
        [sys.executable, __file__, str(directory), nova_url, server_uuid,
         destination],
        stdout=subprocess.PIPE, text=True, timeout=TIMEOUT * 2, check=True)
    return json.loads(done.stdout)


if __name__ == '__main__':
    _migrate(pathlib.Path(sys.argv[1]), *sys.argv[2:])
