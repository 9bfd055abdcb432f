"""Accounting: budgets, costs, accounting models, PINQ's agents and the durable ledger."""
