"""Confluent Schema Registry's errors: an HTTP status, an ``error_code`` and Confluent's message.

The codes and message texts are those of Confluent's ``io.confluent.kafka.schemaregistry.rest
.exceptions.Errors`` and its ``Rest*Exception`` classes (typos included: clients match them).
"""

from __future__ import annotations

from collections.abc import Iterable


class RegistryError(Exception):
    """An answer other than success: rendered as ``{"error_code": code, "message": message}``."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | str | None = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true "
                                     "to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                     "permanently deleted")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


# Confluent 8.2 answers 40901; up to 8.1 (and the CP 7.x clients' tests) 409
INCOMPATIBLE_CODE = 409


def incompatible(subject: str, messages: Iterable[str]) -> RegistryError:
    details = "[" + ", ".join(messages) + "]"  # Java's List.toString()
    return RegistryError(409, INCOMPATIBLE_CODE, f"Schema being registered is incompatible with an earlier schema "
                                                 f'for subject "{subject}", details: {details}')


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values "
                                     'are between [1, 2^31-1] and the string "latest"')


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode() -> RegistryError:
    return RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def references_exist(what: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {what}.")


def id_mismatch() -> RegistryError:
    return RegistryError(422, 42207, "The ID of an imported schema does not match the existing ID")


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def schema_too_large() -> RegistryError:
    return RegistryError(422, 42209, "Register operation failed because schema is too large")


def context_not_empty(context: str) -> RegistryError:
    return RegistryError(422, 42211, f"The specified context '{context}' is not empty.")


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def bad_request(message: str) -> RegistryError:
    """A body that is not JSON, or not the JSON object expected (Confluent's Jackson mapper: 400)."""
    return RegistryError(400, 400, message)
