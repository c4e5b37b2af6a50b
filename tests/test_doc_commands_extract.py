"""Launch commands found in Markdown/MDX (ingest/doc_commands.py), one test per shape.

The Markdown here is made up; no SGLang text.
"""

from __future__ import annotations

import textwrap

from ingest.doc_commands import extract_commands


def found(markdown: str) -> tuple[list[tuple[int, str]], int]:
    result = extract_commands(textwrap.dedent(markdown).lstrip("\n"))
    return [(line, text) for line, text in result["commands"]], result["skipped"]


def test_fenced_block_with_continuations_is_one_command_at_its_first_line():
    commands, skipped = found(
        """
        # Title

        ```bash
        python -m sglang.launch_server \\
          --model-path org/model \\
          --tp 2
        ```
        """
    )
    assert commands == [(4, "python -m sglang.launch_server --model-path org/model --tp 2")]
    assert skipped == 0


def test_python3_and_sglang_serve_and_trailing_blanks_after_the_backslash():
    blanks_after_backslash = "\\   \n"
    commands, _ = found(
        "```\n"
        "python3 -m sglang.launch_server --model-path a/b --port 30001\n"
        "sglang serve --model-path a/b " + blanks_after_backslash + "    --dtype half\n"
        "```\n"
    )
    assert commands == [
        (2, "python3 -m sglang.launch_server --model-path a/b --port 30001"),
        (3, "sglang serve --model-path a/b --dtype half"),
    ]


def test_env_prefixes_stay_with_the_command():
    commands, _ = found(
        """
        ```shell
        CUDA_VISIBLE_DEVICES=0,1 SGLANG_FOO=1 python -m sglang.launch_server --model-path a/b
        ```
        """
    )
    assert commands == [
        (2, "CUDA_VISIBLE_DEVICES=0,1 SGLANG_FOO=1 python -m sglang.launch_server --model-path a/b")
    ]


def test_docker_run_wrapper_is_kept_from_docker_on():
    commands, _ = found(
        """
        ```bash
        docker run --gpus all \\
            --shm-size 32g \\
            -p 30000:30000 \\
            lmsysorg/sglang:latest \\
            python3 -m sglang.launch_server --model-path a/b --host 0.0.0.0
        ```
        """
    )
    assert commands == [
        (
            2,
            "docker run --gpus all --shm-size 32g -p 30000:30000 lmsysorg/sglang:latest "
            "python3 -m sglang.launch_server --model-path a/b --host 0.0.0.0",
        )
    ]


def test_a_template_in_the_docker_wrapper_alone_keeps_the_command():
    commands, skipped = found(
        """
        ```bash
        docker run --env "TOKEN=<secret>" -e "KEY=$KEY" \\
            <image_name> \\
            python3 -m sglang.launch_server --model-path a/b
        ```
        """
    )
    assert commands == [
        (
            2,
            'docker run --env "TOKEN=<secret>" -e "KEY=$KEY" <image_name> '
            "python3 -m sglang.launch_server --model-path a/b",
        )
    ]
    assert skipped == 0


def test_separators_redirections_and_comments_end_the_command():
    commands, _ = found(
        """
        ```bash
        pip install x && python -m sglang.launch_server --model-path a/b --tp 2 && echo done
        python -m sglang.launch_server --model-path a/c > server.log 2>&1 &
        python -m sglang.launch_server --model-path a/d 2>&1 | tee log.txt
        python -m sglang.launch_server --model-path a/e # the small one
        python -m sglang.launch_server --model-path a/f; sleep 5
        python -m sglang.launch_server --model-path a/g || exit 1
        echo x # python -m sglang.launch_server --model-path commented/out
        python -m sglang.launch_server --model-path a/h --json-model-override-args '{"x": 1}'
        ```
        """
    )
    assert [text for _line, text in commands] == [
        "python -m sglang.launch_server --model-path a/b --tp 2",
        "python -m sglang.launch_server --model-path a/c",
        "python -m sglang.launch_server --model-path a/d",
        "python -m sglang.launch_server --model-path a/e",
        "python -m sglang.launch_server --model-path a/f",
        "python -m sglang.launch_server --model-path a/g",
        "python -m sglang.launch_server --model-path a/h --json-model-override-args '{\"x\": 1}'",
    ]


def test_a_comment_line_that_is_a_command_is_one():
    commands, _ = found(
        """
        ```python
        # Launch the server first:
        # python3 -m sglang.launch_server --model-path a/b --port 30000
        #   $ sglang serve --model-path a/c
        client = OpenAI()  # python -m sglang.launch_server --model-path not/this
        ```
        """
    )
    assert commands == [
        (3, "python3 -m sglang.launch_server --model-path a/b --port 30000"),
        (4, "sglang serve --model-path a/c"),
    ]


def test_templates_are_skipped_and_counted():
    commands, skipped = found(
        """
        ```bash
        python -m sglang.launch_server --model-path <model>
        python -m sglang.launch_server --model-path $MODEL --tp 2
        python -m sglang.launch_server --model-path ${MODEL_PATH}
        python -m sglang.launch_server --model-path {model_path}
        python -m sglang.launch_server --model-path a/b ...
        python -m sglang.launch_server --model-path a/b --tp 2
        python -m sglang.launch_server --model-path [model_path] --tp 2
        python -m sglang.launch_server --model-path a/b --grammar-backend [xg|other]
        python -m sglang.launch_server --model-path a/b --x '{"y": [1, 2]}'
        ```
        """
    )
    assert commands == [
        (7, "python -m sglang.launch_server --model-path a/b --tp 2"),
        (10, "python -m sglang.launch_server --model-path a/b --x '{\"y\": [1, 2]}'"),
    ]
    assert skipped == 7


def test_indented_block_counts_and_prose_does_not():
    commands, _ = found(
        """
        Start the server with python -m sglang.launch_server and the flags you need.

            python -m sglang.launch_server --model-path a/b \\
                --port 8000

        Or inline: `python -m sglang.launch_server --model-path a/c --tp 4`.
        """
    )
    assert commands == [
        (3, "python -m sglang.launch_server --model-path a/b --port 8000"),
        (6, "python -m sglang.launch_server --model-path a/c --tp 4"),
    ]


def test_a_launcher_inside_a_quoted_string_ends_with_the_string():
    commands, _ = found(
        """
        ```python
        proc = launch('python3 -m sglang.launch_server --model-path a/b --port 30000')
        server = run_cmd(
            \"\"\"
        python3 -m sglang.launch_server --model-path a/c \\
         --log-level warning
        \"\"\"
        )
        ```
        """
    )
    assert commands == [
        (2, "python3 -m sglang.launch_server --model-path a/b --port 30000"),
        (5, "python3 -m sglang.launch_server --model-path a/c --log-level warning"),
    ]


def test_a_closing_triple_quote_ends_the_command_and_a_grep_pattern_is_none():
    commands, _ = found(
        """
        ```python
        server = run_cmd(\"\"\"python3 -m sglang.launch_server --model-path a/b \\
          --log-level warning \"\"\")
        ```
        ```bash
        ps aux | grep 'sglang.launch_server\\|sglang serve\\|other'
        ```
        ```python
        server = run_cmd(
            \"\"\"
        python3 -m sglang.launch_server --model-path a/c \\
          --log-level warning \"\"\"
        )
        ```
        """
    )
    assert commands == [
        (2, "python3 -m sglang.launch_server --model-path a/b --log-level warning"),
        (11, "python3 -m sglang.launch_server --model-path a/c --log-level warning"),
    ]


def test_a_launcher_without_arguments_and_other_programs_are_not_commands():
    commands, skipped = found(
        """
        ```bash
        sglang serve
        python -m sglang_router.launch_server --model-path a/b
        python -m sglang.launch_router --port 1
        $ python -m sglang.launch_server --model-path a/b
        ```
        """
    )
    assert commands == [(5, "python -m sglang.launch_server --model-path a/b")]
    assert skipped == 0


def test_unclosed_fence_and_tilde_fences():
    commands, _ = found(
        """
        ~~~
        sglang serve --model-path a/b
        ~~~
        ```bash
        sglang serve --model-path a/c
        """
    )
    assert [t for _l, t in commands] == [
        "sglang serve --model-path a/b",
        "sglang serve --model-path a/c",
    ]


def test_the_diffusion_servers_docs_are_another_programs():
    from ingest.doc_commands import is_markdown

    assert is_markdown("docs/basic_usage/send_request.md")
    assert is_markdown("cookbook/models/plain.mdx")
    assert not is_markdown("docs/diffusion/api.md")
    assert not is_markdown("docs_new/docs/sglang-diffusion/cli.mdx")
    assert not is_markdown("docs_new/cookbook/diffusion/Some/Model.mdx")
    assert not is_markdown("python/sglang/srt/server_args.py")
