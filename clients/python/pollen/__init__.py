"""Clients for Pollen (see clients/python/README.md).

pollen.client.SeenSet: "have we seen these keys?" against a list of nodes,
batched, failing over, optionally waiting for replicas.
pollen.scrapy.PollenDupeFilter: Scrapy's dupefilter on a SeenSet.
"""
from pollen.client import NoNodeAvailable, SeenSet

__all__ = ["NoNodeAvailable", "SeenSet"]
