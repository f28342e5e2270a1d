"""Persistence: typed tables (`models`), migrations, the two backends (`backends`), the database
handle (`store`) and the unit of work stages write in (`unit`)."""
