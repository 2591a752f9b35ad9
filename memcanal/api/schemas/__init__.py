"""JSON schemas of the query strings each collection accepts.

``util.validate_query_params`` converts "integer" parameters from their
string before validating, so ranges are stated as numbers here.
"""
