"""Options of healreq's own ``[healreq]`` group."""

from oslo_config import cfg

healreq_group = cfg.OptGroup(
    'healreq',
    title='healreq options',
    help='Options of the nova-heal tool.')

healreq_opts = [
    cfg.IntOpt('batch_size',
               default=200,
               min=1,
               max=10000,
               help='Instances read per batch and cell. Memory use is '
                    'bounded by this number; --batch-size overrides it.'),
    cfg.IntOpt('skip_updated_within',
               default=60,
               min=0,
               help='Skip instances whose instances.updated_at is less '
                    'than this many seconds old, so as not to race an '
                    'operation that has read the spec but not yet saved '
                    'it.'),
]


def register_opts(conf):
    conf.register_group(healreq_group)
    conf.register_opts(healreq_opts, group=healreq_group)


def list_opts():
    return [(healreq_group, healreq_opts)]
