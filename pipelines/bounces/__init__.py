"""Bounce and complaint reports: parsing, classification and their effects."""
