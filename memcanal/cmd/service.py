"""memcanal-service: ingest agent reports and run the periodic decisions."""

from memcanal.cmd import common
from memcanal.service import ingest
from memcanal.service import service


def main():
    ingest.collect_less()
    common.run_service(service.create)
