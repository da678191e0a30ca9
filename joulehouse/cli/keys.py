"""`joulehouse keys generate`: the signing key pair of the recommended-config file (its group is
registered with the agent's, joulehouse.cli.agent.register)."""

from __future__ import annotations

from pathlib import Path

import typer

from joulehouse.cli.options import fail, output_folder

keys_app = typer.Typer(no_args_is_help=True, help="Signing keys for the recommended-config file.")


@keys_app.command("generate")
def keys_generate_command(
    out: Path = typer.Option(..., "--out", help="Folder for joulehouse-ed25519.pem and .pub.pem"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing key pair"),
) -> None:
    """Create an ed25519 key pair: the private key signs exports, the public key goes to the nodes.

    Example: joulehouse keys generate --out /etc/joulehouse/keys
    """
    from joulehouse.collectors.config_contract import generate_keypair

    output_folder(out, "--out", "the folder for the key pair")
    try:
        private_path, public_path = generate_keypair(out, overwrite=overwrite)
    except FileExistsError as exc:  # a key of the pair is already there
        fail(str(exc), 2)
    except OSError as exc:  # a folder that cannot be made or written (/proc/x, read-only, no permission)
        fail(f"cannot write the key pair into {out}: {exc.strerror or exc}", 2)
    typer.echo(f"private key (keep on the analytics host): {private_path}")
    typer.echo(f"public key (copy to every node): {public_path}")
