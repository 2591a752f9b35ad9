"""One memcanal-pager process and its control socket (issue #24).

A pager (hypervisor-patches/pager) serves one guest's RAM for as long as
the guest runs, whether or not it is paged: it samples the guest's page
accesses, and pages it when asked. It must outlive the agent, so it runs
detached, in a session of its own (an agent that stops or crashes leaves
it serving its guest), and the agent speaks to it over its ``--control``
socket: one command a line, one JSON line answered (spec section 4), one
client at a time, any number of clients over the pager's life, so an
agent that restarts connects to it again.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import threading
import time

from oslo_log import log as logging

from memcanal import exception

LOG = logging.getLogger(__name__)
LOG_TAIL = 2000


class PagerError(exception.MemcanalException):
    msg_fmt = 'memcanal-pager %(name)s: %(reason)s'


class UnsupportedCommand(PagerError):
    """The pager answered a command with an error: this build lacks it,
    or it refused it (a fifth store)."""


def shown(line):
    """A command as logs and errors show it: without the lease token of
    a ``store``, which lets whoever holds it store on a memory server."""
    words = line.split()
    return ' '.join(words[:2]) if words[:1] == ['store'] else line


def start_time(pid):
    """When process ``pid`` started (clock ticks since boot, /proc's
    ``starttime``), which a later process reusing the pid does not
    share; None if no such process runs (a zombie has exited)."""
    try:
        with open('/proc/%d/stat' % pid) as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields after the command: state is the 3rd, starttime the 22nd.
    return None if fields[0] in ('Z', 'X') else int(fields[19])


@dataclasses.dataclass
class Process:
    """A pager's process (or its QEMU's): started by this agent
    (``popen``, reaped here), or by another and found by pid and start
    time (None: it had exited already)."""

    pid: int
    started: int | None
    popen: subprocess.Popen | None = dataclasses.field(default=None,
                                                       compare=False)

    @classmethod
    def running(cls, pid, started):
        """The process ``pid`` started at ``started``, if it still runs."""
        process = cls(pid, started)
        return process if process.alive() else None

    def alive(self):
        if self.popen is not None:
            return self.popen.poll() is None
        return self.started is not None and (
            start_time(self.pid) == self.started)

    def wait(self, timeout):
        """Wait up to ``timeout`` seconds for the pager to exit (it does
        once its guest's QEMU exited); kill it if it does not."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                LOG.warning('memcanal-pager %d outlived its guest; killed',
                            self.pid)
                self.kill()
                return
            time.sleep(0.05)

    def kill(self):
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(10)


def launch(binary, arguments, log_path):
    """Start a pager detached from the agent: its own session, no
    standard input, its output appended to ``log_path``."""
    try:
        with open(log_path, 'ab') as log:
            popen = subprocess.Popen(
                [binary, *arguments], stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, start_new_session=True)
    except OSError as error:
        raise PagerError(name=os.path.basename(log_path), reason=(
            'cannot start %s: %s' % (binary, error)))
    # A pager that failed at once has no start time: it is still ours to
    # reap and report.
    return Process(popen.pid, start_time(popen.pid), popen)


class PagerClient:
    """The control connection of one pager, made on first use and made
    again after a failure (a timed-out answer must not be read as the
    next command's)."""

    def __init__(self, control, process, log_path, timeout=120.0):
        self.control = control
        self.process = process
        self.log_path = log_path
        self.timeout = timeout
        self.name = os.path.basename(control)
        self._socket = self._stream = None
        self._lock = threading.Lock()

    def _log_tail(self):
        try:
            with open(self.log_path, errors='replace') as log:
                return log.read()[-LOG_TAIL:].strip()
        except OSError:
            return ''

    def _error(self, doing, reason):
        if not self.process.alive():
            reason = 'exited'
        return PagerError(name=self.name, reason='%s %s: %s' % (
            reason, doing, self._log_tail() or 'nothing in its log'))

    def _connect(self, doing):
        """Connect, waiting for a pager that was just started to
        listen."""
        deadline = time.monotonic() + self.timeout
        while True:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                connection.connect(self.control)
                break
            except (FileNotFoundError, ConnectionRefusedError) as error:
                connection.close()
                if not self.process.alive() or time.monotonic() > deadline:
                    raise self._error(doing, str(error))
                time.sleep(0.02)
        connection.settimeout(self.timeout)
        self._socket = connection
        self._stream = connection.makefile('rw', encoding='utf-8',
                                           errors='replace', newline='\n')

    def _disconnect(self):
        if self._socket is not None:
            try:
                self._stream.close()
            except OSError:             # unsent commands to a dead pager
                pass
            self._socket.close()
        self._socket = self._stream = None

    def commands(self, lines):
        """Send ``lines`` at once and return their answers in order: the
        pager reads the next command while the previous answer travels."""
        if not lines:
            return []
        with self._lock:
            doing = 'on %r' % shown(lines[0])
            try:
                if self._socket is None:
                    self._connect(doing)
                self._stream.write(''.join(line + '\n' for line in lines))
                self._stream.flush()
                # Every answer is read, errors too, so none is left to be
                # taken for the answer to a later command.
                answers = [self._answer(line) for line in lines]
            except OSError as error:
                self._disconnect()
                raise self._error(doing, str(error) or 'no answer')
            except PagerError:
                self._disconnect()
                raise
        for line, answer in zip(lines, answers):
            if answer.get('event') == 'error':
                raise UnsupportedCommand(name=self.name, reason='%r: %s' % (
                    shown(line), answer.get('line', answer)))
        return answers

    def command(self, line):
        return self.commands([line])[0]

    def _answer(self, line):
        verb = line.split()[0]
        while True:
            text = self._stream.readline()
            if not text:
                raise self._error('on %r' % shown(line), 'closed its '
                                  'control socket')
            try:
                answer = json.loads(text)
            except ValueError:
                raise PagerError(name=self.name, reason='said %r on %r' % (
                    text.strip(), shown(line)))
            if answer.get('event') in (None, verb, 'error'):
                return answer
            LOG.debug('memcanal-pager %s: %s', self.name, answer)

    def close(self):
        """Disconnect; the pager serves its guest on."""
        with self._lock:
            self._disconnect()
