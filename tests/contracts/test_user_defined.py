"""A user-defined contract (docs/contracts.md) gets edge checks, validation and the CLI."""
import pytest
from click.testing import CliRunner

from fixtures.vocabulary import Vocabulary
from mlpipe import Input, Output, component, pipeline
from mlpipe.checks import check_pipeline
from mlpipe.cli import main
from mlpipe.contracts import KINDS, compatibility, validate
from mlpipe.errors import ContractError

VOCAB = Vocabulary("tokens", size=4, specials=("<pad>", "<unk>"))


@component
def build_vocab(text: Input["uri_folder"], vocab: Output[VOCAB]):
    pass


@component
def embed(vocab: Input[Vocabulary("tokens", size=5, specials=("<pad>",))],
          model: Output["custom_model"]):
    pass


@pipeline
def text_model(text):
    return embed(vocab=build_vocab(text=text).vocab).model


def test_its_rule_runs_on_every_edge():
    assert compatibility(VOCAB, Vocabulary(specials=("<pad>",))) == []
    _, diagnostics = check_pipeline(text_model.spec)
    assert [(d.code, d.message) for d in diagnostics] == [
        ("MP412", "build_vocab.vocab -> embed.vocab: vocabulary size is 4 but the consumer's "
                  "embedding has 5 rows")]


def test_its_validator_runs_on_files(tmp_path):
    (tmp_path / "v.txt").write_text("<pad>\n<unk>\na\nb\n")
    validate(VOCAB, tmp_path / "v.txt")
    (tmp_path / "v.txt").write_text("<unk>\n<pad>\na\nb\n")
    with pytest.raises(ContractError, match=r"v.txt:1: token 0 is '<unk>' but "
                                            r"vocabulary:tokens requires '<pad>'"):
        validate(VOCAB, tmp_path / "v.txt")


def test_it_is_registered_by_kind_and_named_on_the_command_line(tmp_path):
    assert KINDS["vocabulary"] is Vocabulary
    (tmp_path / "v.txt").write_text("<pad>\na\n")
    result = CliRunner().invoke(main, ["validate", "fixtures.vocabulary:Vocabulary",
                                       str(tmp_path / "v.txt")])
    assert result.exit_code == 0, result.output
    assert result.output == f"{tmp_path / 'v.txt'}: matches vocabulary\n"


def test_a_rule_that_raises_is_reported_not_raised():
    class Broken(Vocabulary):
        def differences(self, required):
            raise RuntimeError("boom")

    @component
    def make(text: Input["uri_folder"], vocab: Output[Broken("tokens")]):
        pass

    @pipeline
    def p(text):
        return embed(vocab=make(text=text).vocab).model

    _, diagnostics = check_pipeline(p.spec)
    # (a component defined inside this test function is also MP113: no step could import it)
    crashed = [d for d in diagnostics if d.code != "MP113"]
    assert [(d.code, d.message) for d in crashed] == [
        ("MP001", "make.vocab -> embed.vocab: the compatibility rule of vocabulary:tokens "
                  "raised RuntimeError: boom")]
    # the user's own contract type is at fault, and the hint says which one and where
    assert crashed[0].hint.startswith("fix the differences() method of the contract type "
                                      "test_a_rule_that_raises_is_reported_not_raised."
                                      "<locals>.Broken")
    assert "test_user_defined.py:" in crashed[0].hint
