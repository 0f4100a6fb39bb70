"""Adapters to other RL frameworks' environment interfaces, each a thin layer over the one episode driver.

* :mod:`tau2_gym.frameworks.openenv`: an OpenEnv server (``tau2-gym serve``) and its client
  (extra ``tau2-gym[openenv]``);
* :mod:`tau2_gym.frameworks.verifiers`: a verifiers environment (``load_environment``; extra ``tau2-gym[verifiers]``).

Importing this package is cheap: each framework is imported only inside its own module.
"""
