"""How synchronous SGD runs on the cluster: the strategy, the schedules that group gradients
into operations, Horovod's releases and coordinator settings, and the DAG of one iteration."""
