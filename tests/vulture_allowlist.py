"""Names vulture cannot see used: frameworks read or call them (make lint's dead-code check, min confidence 60).

vulture (https://github.com/jendrikseipp/vulture) reports a name nothing in the scanned code refers to. These are
referred to by the program that loads the code, so each is listed here with who uses it. A name that is really
unused does not belong here: remove it from the code instead.
"""
# pylint: disable=pointless-statement,undefined-variable
# flake8: noqa

# ansible-core's plugin loaders and ansible-doc: module and doc-fragment documentation, filter plugins' entry point,
# the callback plugin's class attributes, the action plugin's transfer flag.
DOCUMENTATION
EXAMPLES
RETURN
ModuleDocFragment
READ_ONLY  # a doc fragment: extends_documentation_fragment ddp.cluster.health.READ_ONLY
FilterModule
filters
CALLBACK_VERSION
CALLBACK_TYPE
CALLBACK_NAME
TRANSFERS_FILES
# ansible-core's callback hooks of benchmarks/callback_plugins/node_cpu.py (enabled by converge.sh), and its flag
# that the callback runs only where ANSIBLE_CALLBACKS_ENABLED names it.
CALLBACK_NEEDS_ENABLED
v2_playbook_on_task_start
v2_playbook_on_handler_task_start
v2_playbook_on_play_start
v2_playbook_on_stats
# ansible-core's hook of plugins/callback/plugin_preload.py (sent just before each worker starts).
v2_runner_on_start

# http.server (roles/pytorch_env/files/ddp_wheelhouse_index.py): the handler's and the server's attributes and hooks.
server_version
protocol_version
log_message
format  # log_message's argument name, as http.server declares it
do_GET
daemon_threads
address_family

# torch (roles/ddp_benchmark/files/ddp_bench.py): settings torch reads, the DataLoader's worker_init_fn argument.
benchmark  # torch.backends.cudnn.benchmark
allow_tf32  # torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
worker_id
