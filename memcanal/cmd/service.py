"""memcanal-service: ingest agent reports and run the periodic decisions."""

from memcanal.cmd import common
from memcanal.service import service


def main():
    common.run_service(service.create)
