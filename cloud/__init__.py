"""Providers (local, gcp, aws) behind one interface, and the instance and price catalog."""
