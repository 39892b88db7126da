"""The frameworks' hooks timed on their own: ``hook="torch"`` and ``hook="triton"`` per operator, launch and step."""
