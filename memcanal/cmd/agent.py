"""memcanal-agent: the compute agent of one host."""

from memcanal.agent import service
from memcanal.cmd import common


def main():
    common.run_service(service.create)
