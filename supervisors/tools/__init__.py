"""The tools front door (:class:`Tools`) and the host actors of tool sources
(:func:`tool_hosts`): see :mod:`supervisors.tools.front`."""

from supervisors.tools.front import Tools
from supervisors.tools.hosts import host_ids, tool_hosts

__all__ = ["Tools", "host_ids", "tool_hosts"]
