"""The scripted server's critic endpoint (`/classify`): scripted scores, steps, faults, and
the SDK's own critic client reading them."""

from __future__ import annotations

import httpx
import pytest

from trio_acp.testing.critic_wire import CRITIC_LABELS, CriticStep, critic_step


def _chatml(*turns: tuple[str, str]) -> str:
    return "".join(f"<|im_start|>{role}\n{text}<|im_end|>\n" for role, text in turns)


def test_the_step_follows_the_user_turns_after_the_tag():
    tagged = ("user", "fix it [critic:0.2+loop_behavior=0.9,0.5,0.95]")
    assert critic_step(_chatml(("system", "s"), tagged, ("assistant", "done"))) == CriticStep(
        0.2, (("loop_behavior", 0.9),)
    )
    one = _chatml(tagged, ("assistant", "a"), ("user", "refine 1"), ("assistant", "b"))
    assert critic_step(one).score == 0.5
    # Tool results (rendered as a user turn by the Qwen template) are not user turns.
    tool = _chatml(tagged, ("assistant", "a"), ("user", "<tool_response>\nok\n</tool_response>"))
    assert critic_step(tool).score == 0.2
    many = one + _chatml(("user", "refine 2"), ("user", "refine 3"))
    assert critic_step(many).score == 0.95  # the last step repeats
    assert critic_step(_chatml(("user", "no tag"))) == CriticStep()
    assert critic_step("[critic:http503]").http_status == 503
    assert critic_step("[critic:stall]").fault == "stall"
    with pytest.raises(ValueError, match="unknown critic label"):
        critic_step("[critic:0.5+not_a_label=1]")


def test_classify_answers_and_records(llm):
    llm.critic_requests.clear()
    rendered = _chatml(("user", "go [critic:0.3+insufficient_testing=0.8]"))
    r = httpx.post(
        f"{llm.url}/vllm/classify",
        json={"model": "critic", "input": rendered},
        headers={"Authorization": "Bearer k1"},
    )
    assert r.status_code == 200
    item = r.json()["data"][0]
    assert item["num_classes"] == len(CRITIC_LABELS) == len(item["probs"])
    probs = dict(zip(CRITIC_LABELS, item["probs"], strict=True))
    assert probs["success"] == 0.3 and probs["insufficient_testing"] == 0.8
    assert llm.critic_requests[-1]["api_key"] == "k1"
    failed = httpx.post(f"{llm.url}/vllm/classify", json={"input": "[critic:http503]"})
    assert failed.status_code == 503 and "error" in failed.json()


def test_the_sdks_critic_client_reads_the_scripted_scores(llm):
    from openhands.sdk.critic.impl.api import APIBasedCritic

    critic = APIBasedCritic(server_url=f"{llm.url}/vllm", api_key="k", model_name="critic")
    # The label space the server scripts is the SDK's.
    assert CRITIC_LABELS == critic.all_labels
    from openhands.sdk.critic.impl.api.chat_template import ChatTemplateRenderer

    critic._template_renderer = ChatTemplateRenderer(
        chat_template="{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    )
    result = critic.classify_trace([{"role": "user", "content": "x [critic:0.25+scope_creep=0.9]"}])
    probs = critic.extract_prob_map(result).probs
    assert probs["success"] == 0.25 and probs["scope_creep"] == 0.9
