"""The PostgreSQL engine: plans run as SQL inside a PostgreSQL server (psycopg 3)."""
