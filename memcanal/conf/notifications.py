"""Options of versioned notifications.

Where and how they are sent is oslo.messaging's
``[oslo_messaging_notifications]``: ``driver`` (none, the default, sends
nothing; ``messagingv2`` sends over its ``transport_url``, by default the
RPC one). These say whether memcanal
makes them and on which topics, as nova's ``[notifications]`` does.
"""

from oslo_config import cfg

notifications_group = cfg.OptGroup('notifications',
                                   title='Versioned notifications')

notifications_opts = [
    cfg.StrOpt('notification_format',
               default='versioned',
               choices=[('versioned', 'oslo.versionedobjects payloads '
                                      '(doc/notification_samples/)'),
                        ('none', 'no notifications')],
               help='Which notifications memcanal emits; they are sent '
                    'only when [oslo_messaging_notifications] driver is '
                    'set (messagingv2).'),
    cfg.ListOpt('versioned_notifications_topics',
                default=['versioned_notifications'],
                help='Topics memcanal\'s versioned notifications are sent '
                     'on (the topic nova, Watcher and ironic use).'),
]


def register_opts(conf):
    conf.register_group(notifications_group)
    conf.register_opts(notifications_opts, group=notifications_group)


def list_opts():
    return {notifications_group: notifications_opts}
