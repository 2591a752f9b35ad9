"""Several simulated compute hosts' agents in one process, as
memcanal-aio runs them, for the tests and benchmarks of several
memcanal-service processes (controllers.py): one process for all the
agents keeps a 2-core machine free for the services under test.

    python -m memcanal.tests.functional.sim_agents --hosts N \
        --config-file memcanal.conf

Runs until SIGTERM; the hosts are sim-host-1 .. sim-host-N.
"""

import argparse
import signal
import sys
import threading

from memcanal.agent import service as agent_service
from memcanal.cmd import common
from memcanal import rpc


def host_name(index):
    return 'sim-host-%d' % (index + 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=6)
    args, oslo_args = parser.parse_known_args(
        (argv or sys.argv)[1:])
    common.parse_args(['sim-agents'] + oslo_args, default_config_files=[])
    rpc.init(common.CONF)
    agents = [agent_service.create(common.CONF, host=host_name(i))
              for i in range(args.hosts)]
    for agent in agents:
        agent.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    for agent in agents:
        agent.stop()
    rpc.cleanup()


if __name__ == '__main__':
    main()
