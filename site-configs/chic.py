"""CHiC, Chemnitz High-Performance Linux Cluster (2007): the paper's system as site-configs/chic.yaml describes it."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
