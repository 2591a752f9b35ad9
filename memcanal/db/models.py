"""SQLAlchemy models: what memcanal knows about hosts, VMs and decisions.

Sizes are bytes (BigInteger) everywhere, so a WSS, an allocation and a
point of a miss-ratio curve compare without unit conversions. Times are
naive UTC, as oslo.utils' timeutils gives them.
"""

from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy import orm

# A decision waits in 'recommended' for an operator (or is approved at
# once in auto mode); its actions then go to the agent, and its state
# follows their outcome. See memcanal.db.transitions.DECISION_TRANSITIONS.
DECISION_STATES = ('recommended', 'approved', 'applied', 'failed',
                   'rejected', 'superseded', 'rolling_back', 'rolled_back',
                   'rollback_failed')
DECISION_MODES = ('recommend', 'auto')
# 'skipped': not applied because an earlier action of its decision failed.
ACTION_STATES = ('pending', 'sent', 'applied', 'failed', 'skipped')
# Derived, never stored: a host is down once it missed
# [service] missed_heartbeats of its own report intervals.
HOST_STATES = ('up', 'down')


class Base(orm.DeclarativeBase):
    pass


class TimestampMixin:
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)
    updated_at = sa.Column(sa.DateTime, nullable=True,
                           onupdate=timeutils.utcnow)


class Host(TimestampMixin, Base):
    """A compute host running a memcanal agent."""

    __tablename__ = 'hosts'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_hosts0uuid'),
        sa.UniqueConstraint('name', name='uniq_hosts0name'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(36), nullable=False)
    name = sa.Column(sa.String(255), nullable=False)
    memory_total_bytes = sa.Column(sa.BigInteger, nullable=False)
    memory_reserved_bytes = sa.Column(sa.BigInteger, nullable=False,
                                      default=0)
    last_heartbeat_at = sa.Column(sa.DateTime, nullable=True)
    # Seconds between the agent's reports, as it registered; its state
    # is derived from this and last_heartbeat_at.
    report_interval = sa.Column(sa.Float, nullable=True)
    # Highest report sequence stored; a restarted agent resumes after it.
    last_sequence = sa.Column(sa.BigInteger, nullable=False, default=0)
    # Nova's availability zone of the host; a live migration stays in it.
    availability_zone = sa.Column(sa.String(255), nullable=True)
    # The MEMORY_MB allocation ratio memcanal last set in placement.
    allocation_ratio = sa.Column(sa.Float, nullable=True)
    # The Ed25519 public key (base64 of its raw bytes) the host's agent
    # first registered with: the service takes only messages of the host
    # signed by it. None until a registration pins one (a host from
    # before keys, or one an operator had forget its key).
    public_key = sa.Column(sa.String(64), nullable=True)
    # What its agent registered the host as ('qemu', 'xen', 'simulated':
    # memcanal.hypervisors); None for hosts from before, taken as nova's.
    hypervisor_type = sa.Column(sa.String(32), nullable=True)
    # The agent API version (memcanal.rpc.agent_api) its agent serves, as
    # it registered it (service RPC 1.9); None: an older agent.
    agent_version = sa.Column(sa.String(16), nullable=True)
    # Replays (memcanal.rpc.freshness): the highest report sequence
    # retention deleted (a report at or below it that is not stored is
    # refused, though the row that would say it was is gone); the
    # agent's sent_at of the host's newest registration (an older one
    # is refused); whether its agent stamps its messages (from then on
    # one without is refused). Server defaults: an older service
    # inserts hosts without them during a rolling upgrade.
    folded_sequence = sa.Column(sa.BigInteger, nullable=False, default=0,
                                server_default='0')
    registered_sent_at = sa.Column(sa.DateTime, nullable=True)
    stamped = sa.Column(sa.Boolean, nullable=False, default=False,
                        server_default='0')
    # Whether an operator admitted the host to memory pooling (API 1.10):
    # until then its VMs borrow nothing and its memory server lends
    # nothing, whatever its agent reports. A new host is not admitted;
    # None (a host an older service inserted during a rolling upgrade)
    # is not either. No server default: MariaDB and PostgreSQL spell a
    # boolean's differently, and None says the same.
    pooling_admitted = sa.Column(sa.Boolean, nullable=True, default=False)


class Service(TimestampMixin, Base):
    """A memcanal-service process and the service API version it serves,
    refreshed while it runs (updated_at): what agents under
    ``[upgrade_levels] service = auto`` cap their messages at."""

    __tablename__ = 'services'
    __table_args__ = (
        sa.UniqueConstraint('name', name='uniq_services0name'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    name = sa.Column(sa.String(255), nullable=False)
    rpc_version = sa.Column(sa.String(16), nullable=False)


class Instance(TimestampMixin, Base):
    """A VM, as its host's agent last described it."""

    __tablename__ = 'instances'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_instances0uuid'),
        sa.Index('instances_project_id_idx', 'project_id'),
        sa.Index('instances_host_id_idx', 'host_id'),
        sa.Index('instances_deleted_at_idx', 'deleted_at'),
        sa.Index('instances_owner_id_idx', 'owner_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(36), nullable=False)
    host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                        nullable=True)
    project_id = sa.Column(sa.String(255), nullable=False)
    # Its pages' owner id (memcanal.owners.owner_of), set when a report
    # first names it; no other VM's report names a VM of the same id
    # (memcanal.db.claims). None: a VM from before 0015 whose id another
    # VM took first, never paged to a memory server.
    owner_id = sa.Column(sa.BigInteger, nullable=True)
    allocated_bytes = sa.Column(sa.BigInteger, nullable=False)
    # Set only by applied decisions (memcanal.db.action_delivery).
    target_bytes = sa.Column(sa.BigInteger, nullable=True)
    # The memory the agent last saw the VM at; reports set it, and it
    # never feeds a decision's previous size.
    observed_bytes = sa.Column(sa.BigInteger, nullable=True)
    floor_bytes = sa.Column(sa.BigInteger, nullable=True)
    ceiling_bytes = sa.Column(sa.BigInteger, nullable=True)
    opt_out = sa.Column(sa.Boolean, nullable=False, default=False)
    # How to resize this VM (memcanal.agent.driver.MECHANISMS); None: the
    # service's default.
    mechanism = sa.Column(sa.String(16), nullable=True)
    # When memcanal last changed its target, for the hold time.
    target_changed_at = sa.Column(sa.DateTime, nullable=True)
    # When a report of its host last listed it; an instance its host has
    # stopped listing for [service] instance_gone_after is deleted.
    last_reported_at = sa.Column(sa.DateTime, nullable=True)
    deleted_at = sa.Column(sa.DateTime, nullable=True)
    # The flavor's name (nova's metadata): a new VM's demand is estimated
    # from the VMs of its flavor.
    flavor = sa.Column(sa.String(255), nullable=True)
    # The latest report's working set, by the most exact estimator.
    wss_bytes = sa.Column(sa.BigInteger, nullable=True)
    # Its 95 % interval when it was sampled (RPC 1.7; None: read as
    # exact). The VM's demand is taken from the upper bound.
    wss_low_bytes = sa.Column(sa.BigInteger, nullable=True)
    wss_high_bytes = sa.Column(sa.BigInteger, nullable=True)
    # Remote paging, as the agent last saw it: how much of the VM's
    # memory the host holds, and how much its pager moved to stores.
    resident_bytes = sa.Column(sa.BigInteger, nullable=True)
    paged_bytes = sa.Column(sa.BigInteger, nullable=True)
    # How much of its memory the VM keeps resident while memory pooling
    # pages the rest out (None: all of it). Set only by applied pooling
    # decisions (memcanal.db.action_delivery).
    resident_target_bytes = sa.Column(sa.BigInteger, nullable=True)
    # What the guest reached at memcanal's last memory target, as its
    # agent read it back (memcanal.agent.settle); None when the agent
    # did not say (before RPC 1.8) or no target was set. Set only by
    # applied decisions, with target_bytes.
    reached_bytes = sa.Column(sa.BigInteger, nullable=True)

    host = orm.relationship(Host)


class MemoryServer(TimestampMixin, Base):
    """A memcanal-memserver, lending a host's idle memory to pagers on
    other hosts; its host's agent registers it with every report, and it
    lends nothing until an operator enables it."""

    __tablename__ = 'memory_servers'
    __table_args__ = (
        sa.UniqueConstraint('host_id', name='uniq_memory_servers0host_id'),
        sa.UniqueConstraint('uuid', name='uniq_memory_servers0uuid'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(36), nullable=False)
    host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                        nullable=False)
    # HOST:PORT where pagers reach it.
    address = sa.Column(sa.String(255), nullable=False)
    capacity_bytes = sa.Column(sa.BigInteger, nullable=False)
    # What it holds now, by its own count (reported, never decided).
    used_bytes = sa.Column(sa.BigInteger, nullable=False, default=0)
    # Whether pooling may lend from it: set only by an operator (PATCH
    # /memory_servers/{uuid}); a new server, or one whose address
    # changed, is disabled.
    enabled = sa.Column(sa.Boolean, nullable=False, default=False)


class MemoryLease(Base):
    """Memory of a memory server lent to one VM's pager by an applied
    pooling decision; deleted when the VM's pages come back.

    Instance and decision are kept by uuid, not by foreign key, so
    archiving either never trips over a lease.
    """

    __tablename__ = 'memory_leases'
    __table_args__ = (
        sa.UniqueConstraint('instance_uuid',
                            name='uniq_memory_leases0instance_uuid'),
        sa.Index('memory_leases_memory_server_id_idx', 'memory_server_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    memory_server_id = sa.Column(sa.Integer,
                                 sa.ForeignKey('memory_servers.id'),
                                 nullable=False)
    borrower_host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                                 nullable=False)
    instance_uuid = sa.Column(sa.String(36), nullable=False)
    decision_uuid = sa.Column(sa.String(36), nullable=False)
    lent_bytes = sa.Column(sa.BigInteger, nullable=False)
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)


class LeaseRevocation(Base):
    """A lease the service ended (issue #36): the lender's agent is told
    to revoke it on its memory server, again each run, until the tokens
    issued before ``revoked_at`` have expired; then the row goes."""

    __tablename__ = 'lease_revocations'
    __table_args__ = (
        sa.Index('lease_revocations_revoked_at_idx', 'revoked_at'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    lender_host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                               nullable=False)
    instance_uuid = sa.Column(sa.String(36), nullable=False)
    revoked_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)


class HostReport(Base):
    """One report of an agent; (host, sequence) is stored at most once."""

    __tablename__ = 'host_reports'
    __table_args__ = (
        sa.UniqueConstraint('host_id', 'sequence',
                            name='uniq_host_reports0host_id0sequence'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                        nullable=False)
    sequence = sa.Column(sa.BigInteger, nullable=False)
    collected_at = sa.Column(sa.DateTime, nullable=False)
    received_at = sa.Column(sa.DateTime, nullable=False,
                            default=timeutils.utcnow)


class InstanceReport(Base):
    """What one host report said about one instance."""

    __tablename__ = 'instance_reports'
    __table_args__ = (
        sa.UniqueConstraint(
            'host_report_id', 'instance_id',
            name='uniq_instance_reports0host_report_id0instance_id'),
        sa.Index('instance_reports_instance_id_idx', 'instance_id', 'id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    host_report_id = sa.Column(sa.Integer, sa.ForeignKey('host_reports.id'),
                               nullable=False)
    instance_id = sa.Column(sa.Integer, sa.ForeignKey('instances.id'),
                            nullable=False)
    sequence = sa.Column(sa.BigInteger, nullable=False)
    collected_at = sa.Column(sa.DateTime, nullable=False)
    allocated_bytes = sa.Column(sa.BigInteger, nullable=False)
    guest_stats = sa.Column(sa.JSON, nullable=False)
    # What the PRL and PML logs did in the interval (memcanal.rpc.reports);
    # NULL when the agent did not say, as agents before the field do not
    # (none_as_null: None is SQL NULL, not the JSON text 'null').
    log_stats = sa.Column(sa.JSON(none_as_null=True), nullable=True)

    # The report's working-set sizes ({estimator: bytes}) and miss-ratio
    # curves ({method: [[memory size in bytes, miss ratio], ...]}), kept
    # in the row as the agent sent them: one row per VM and report, where
    # a row per estimate and per curve made storing a report cost more
    # than receiving it. NULL for a report stored before 0007 without
    # any.
    wss = sa.Column(sa.JSON(none_as_null=True), nullable=True)
    mrc = sa.Column(sa.JSON(none_as_null=True), nullable=True)
    # Their 95 % intervals, as the agent sent them (RPC 1.7,
    # memcanal.rpc.reports): {estimator: [low, high]} and {method:
    # {"low": curve, "high": curve}}; NULL when it sent none.
    wss_bounds = sa.Column(sa.JSON(none_as_null=True), nullable=True)
    mrc_bands = sa.Column(sa.JSON(none_as_null=True), nullable=True)


class ReportRejection(Base):
    """A report the service refused, kept so rejections can be counted.

    The host is kept by the uuid the report claimed, since unknown hosts
    are one reason for rejection.
    """

    __tablename__ = 'report_rejections'
    __table_args__ = (
        sa.Index('report_rejections_host_uuid_idx', 'host_uuid'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    host_uuid = sa.Column(sa.String(255), nullable=True)
    sequence = sa.Column(sa.BigInteger, nullable=True)
    code = sa.Column(sa.String(64), nullable=False)
    detail = sa.Column(sa.Text, nullable=False)
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)


class Decision(TimestampMixin, Base):
    """Why the service decided something: the policy, its inputs, outputs."""

    __tablename__ = 'decisions'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_decisions0uuid'),
        sa.Index('decisions_host_id_state_idx', 'host_id', 'state'),
        sa.Index('decisions_peer_host_id_idx', 'peer_host_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(36), nullable=False)
    host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                        nullable=True)
    kind = sa.Column(sa.String(32), nullable=False)
    policy = sa.Column(sa.String(64), nullable=False)
    inputs = sa.Column(sa.JSON, nullable=False)
    outputs = sa.Column(sa.JSON, nullable=False)
    state = sa.Column(sa.String(16), nullable=False, default='recommended')
    mode = sa.Column(sa.String(16), nullable=False, default='recommend')
    # The other host a decision concerns: a migration's destination.
    peer_host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                             nullable=True)


class Action(TimestampMixin, Base):
    """One step that carries out a decision, and where it stands."""

    __tablename__ = 'actions'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_actions0uuid'),
        sa.Index('actions_state_idx', 'state'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(36), nullable=False)
    decision_id = sa.Column(sa.Integer, sa.ForeignKey('decisions.id'),
                            nullable=True)
    host_id = sa.Column(sa.Integer, sa.ForeignKey('hosts.id'),
                        nullable=True)
    instance_id = sa.Column(sa.Integer, sa.ForeignKey('instances.id'),
                            nullable=True)
    kind = sa.Column(sa.String(32), nullable=False)
    params = sa.Column(sa.JSON, nullable=False)
    state = sa.Column(sa.String(16), nullable=False, default='pending')
    error = sa.Column(sa.Text, nullable=True)
    # What the agent said it did (memcanal.agent.driver.Resize fields).
    result = sa.Column(sa.JSON, nullable=True)


class DecisionEvent(Base):
    """One change of a decision's state: from what, to what, by whom
    (a user and project; none when the service itself moved it), why."""

    __tablename__ = 'decision_events'
    __table_args__ = (
        sa.Index('decision_events_decision_id_idx', 'decision_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    decision_id = sa.Column(sa.Integer, sa.ForeignKey('decisions.id'),
                            nullable=False)
    from_state = sa.Column(sa.String(16), nullable=True)
    to_state = sa.Column(sa.String(16), nullable=False)
    user_id = sa.Column(sa.String(255), nullable=True)
    project_id = sa.Column(sa.String(255), nullable=True)
    reason = sa.Column(sa.Text, nullable=True)
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)


# Retention (memcanal.db.retention) picks reports by age.
sa.Index('instance_reports_collected_at_idx', InstanceReport.collected_at)
sa.Index('host_reports_collected_at_idx', HostReport.collected_at)


class InstanceReportHistory(Base):
    """One instance's reports over one period, summed up before they are
    deleted (memcanal.db.retention).

    Keyed by the instance's uuid, not a foreign key, so the history stays
    readable when the instance is archived and ages out on its own.
    ``stats`` holds ``{"allocated_bytes": S, "wss": {estimator: S},
    "guest_stats": {name: S}}`` where each S is ``{"count", "min", "mean",
    "max"}`` over the reports that had that value. Summaries merge, so a
    period folded in several batches (or a late report) gives the row
    one fold would have (to float rounding of the means). ``mrc`` is the
    curves of the period's last report.
    """

    __tablename__ = 'instance_report_history'
    __table_args__ = (
        sa.UniqueConstraint(
            'instance_uuid', 'period_start',
            name='uniq_instance_report_history0instance_uuid0period_start'),
        sa.Index('instance_report_history_period_start_idx',
                 'period_start'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    instance_uuid = sa.Column(sa.String(36), nullable=False)
    period_start = sa.Column(sa.DateTime, nullable=False)
    period_seconds = sa.Column(sa.Integer, nullable=False)
    report_count = sa.Column(sa.Integer, nullable=False)
    first_collected_at = sa.Column(sa.DateTime, nullable=False)
    last_collected_at = sa.Column(sa.DateTime, nullable=False)
    stats = sa.Column(sa.JSON, nullable=False)
    mrc = sa.Column(sa.JSON(none_as_null=True), nullable=True)


def _shadow(model, *indexes):
    """The archive of ``model``'s table, as nova keeps them: the same
    columns under ``shadow_<table>``, no foreign keys or unique
    constraints (rows arrive child first and leave in any order).

    Derived from the model, so a column added to the table without its
    migration also adding it here fails the migration test.
    """
    table = model.__table__
    return sa.Table(
        'shadow_' + table.name, Base.metadata,
        *[sa.Column(column.name, column.type.copy(),
                    primary_key=column.primary_key, autoincrement=False,
                    nullable=column.nullable)
          for column in table.columns],
        *[sa.Index('shadow_%s_%s_idx' % (table.name, name), name)
          for name in indexes])


# Production table name -> its shadow table (memcanal-manage db archive).
SHADOW_TABLES = {
    'instances': _shadow(Instance),
    'decisions': _shadow(Decision),
    'actions': _shadow(Action, 'decision_id'),
    'decision_events': _shadow(DecisionEvent, 'decision_id'),
}
