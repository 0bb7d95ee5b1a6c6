"""Hardware: GPU, link and network catalogs and the resolved :class:`Cluster`."""
