"""The Qwen3-style ChatML chat template, as a Jinja string for `apply_chat_template`.

Every message is `<|im_start|>{role}\\n{content}<|im_end|>\\n`. Tools are listed as JSON lines
inside `<tools>` in the system turn; an assistant's tool calls follow its text as
`<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`; tool results go back as a user
turn holding one `<tool_response>` block per result, consecutive results sharing the turn.
An assistant message's `reasoning_content` is rendered inside `<think>...</think>`. With
`enable_thinking=False` the generation prompt carries an empty think block, as Qwen3's does.

transformers renders templates with `trim_blocks`, which drops a newline right after a block
tag, so such newlines are written as `{{ '\\n' }}`.
"""

from __future__ import annotations

QWEN3_CHAT_TEMPLATE = (
    "{% if tools %}"
    "<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content + '\\n\\n' }}{% endif %}"
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}"
    "{{ '\\n' }}</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "{% elif messages[0].role == 'system' %}"
    "<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' %}"
    "{% if not loop.first %}"
    "{{ raise_exception('a system message must come first') }}"
    "{% endif %}"
    "{% elif message.role == 'user' %}"
    "<|im_start|>user\n{{ message.content }}<|im_end|>\n"
    "{% elif message.role == 'assistant' %}"
    "<|im_start|>assistant\n"
    "{% if message.reasoning_content is defined and message.reasoning_content %}"
    "<think>\n{{ message.reasoning_content.strip('\\n') }}\n</think>\n\n"
    "{% endif %}"
    "{{ message.content or '' }}"
    "{% if message.tool_calls is defined and message.tool_calls %}"
    "{% for call in message.tool_calls %}"
    "{% set call = call.function if call.function is defined else call %}"
    "{% if not loop.first or message.content %}{{ '\\n' }}{% endif %}"
    '<tool_call>\n{"name": "{{ call.name }}", "arguments": '
    "{{ call.arguments if call.arguments is string else call.arguments | tojson }}"
    "}\n</tool_call>"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% elif message.role == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}"
    "{{ '\\n' }}<tool_response>\n{{ message.content }}\n</tool_response>"
    "{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>\n{% endif %}"
    "{% else %}"
    "{{ raise_exception('unknown role: ' + message.role) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n"
    "{% endif %}"
    "{% endif %}"
)
