import subprocess
import sys


def test_memcanal_runs_on_native_threads():
    """Importing memcanal's RPC, agent and service selects threading, and
    nothing monkey-patches the standard library."""
    code = (
        'import memcanal.agent.service, memcanal.service.service\n'
        'from oslo_service import backend\n'
        'import socket, threading\n'
        'assert backend.get_backend_type() == backend.BackendType.THREADING\n'
        'import sys\n'
        'patcher = sys.modules.get("eventlet.patcher")\n'
        'assert patcher is None or not patcher.is_monkey_patched("socket")\n'
        'assert patcher is None or not patcher.is_monkey_patched("thread")\n'
        'print("threading")\n')
    result = subprocess.run([sys.executable, '-c', code],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == 'threading'
