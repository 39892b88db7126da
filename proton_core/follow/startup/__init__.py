"""The directory ``proton-profile`` puts first on ``PYTHONPATH`` of the processes it follows: it holds
only the ``sitecustomize`` start-up hook (:mod:`proton_core.follow`)."""
