"""The security analyzer that stops the SDK before an action reads a credential file.

The modes that ask less than always (`always-approve`, `llm-approve`) would let such an
action run unasked; `sdk.confirmation_setup` gives their conversation this analyzer and a
policy that stops for HIGH, and confirm.py then asks (credential_files.py says what counts).

It is a pydantic model stored with the conversation's state like the SDK's analyzers, so
it is a module-level class (the SDK refuses to store a local one; it is stored by its class
name, which therefore never changes) and this module imports the SDK: only
`trio_acp.openhands.sdk.loaded` imports it.
"""

from __future__ import annotations

from openhands.sdk.event import ActionEvent
from openhands.sdk.security.llm_analyzer import LLMSecurityAnalyzer
from openhands.sdk.security.risk import SecurityRisk

from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.translate import tool_arguments


class TrioAcpCredentialGuard(LLMSecurityAnalyzer):
    """HIGH for an action that reads one of `files`; otherwise the model's own rating
    (`model_rates`, llm-approve: the SDK's `LLMSecurityAnalyzer`) or LOW (always-approve)."""

    directory: str
    files: list[list[str]]  # [absolute path, what it holds]
    home: str = ""
    cwd: str = ""
    model_rates: bool = False

    def security_risk(self, action: ActionEvent) -> SecurityRisk:
        files = CredentialFiles(
            directory=self.directory,
            files=tuple((path, holds) for path, holds in self.files),
            home=self.home,
        )
        if files.read_by(action.tool_name, tool_arguments(action), self.cwd) is not None:
            return SecurityRisk.HIGH
        return super().security_risk(action) if self.model_rates else SecurityRisk.LOW


CredentialGuard = TrioAcpCredentialGuard
