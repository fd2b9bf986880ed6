"""The tag table of the BFCL v4 multi-turn function docs (the `bfcl` manifest format).

BFCL's docs (``bfcl_eval/data/multi_turn_func_doc/*.json``) carry no category tags; this table
gives each function its tags and target, decided from what its backend
(``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``) does to the instance's state:

* ``read``: returns data, changes no public attribute (``ls``, ``cat``, ``grep``, ``sort`` --
  BFCL's ``sort`` returns the sorted text and leaves the file alone -- every math function, the
  ``get_*`` / ``list_*`` / ``search_*`` lookups);
* ``write``: changes the state the checker compares (``touch``, ``echo``, ``mkdir``, ``cp``,
  ``post_tweet``, ``send_message``, ``place_order``, ``book_flight``, every vehicle actuator);
* ``write, destructive``: removes or overwrites something that was there (``mv``, ``rm``,
  ``rmdir``, ``delete_message``, ``unfollow_user``, ``close_ticket``, ``cancel_order``,
  ``remove_stock_from_watchlist``, ``withdraw_funds``, ``cancel_booking``, memory ``*_clear`` /
  ``*_remove``);
* ``auth`` (and ``write``: the login state is compared by the checker): logs a user in or out (``authenticate_twitter``, ``message_login``, ``ticket_login``,
  ``logout``, ``trading_login``, ``trading_logout``, ``authenticate_travel``);
* ``needs_auth``: the backend answers an error (``User not authenticated``, ``No user is currently
  logged in``, ``Invalid access token``) unless a user is logged in: Twitter's posting, commenting
  and following, ``create_ticket`` / ``get_user_tickets``, messaging, the trading account calls,
  the travel calls that take an ``access_token``;
* ``navigate``: ``cd``, which moves the working directory (a private attribute the checker does
  not compare) and changes no file;
* ``verify``: ``verify_traveler_information`` (checks data, changes nothing).

A target is the parameter that names the thing acted on (``file_name``, ``source``, ``tweet_id``,
``booking_id``, ...); None where there is none.  The table covers every function of the eight
multi-turn classes and of the memory and web-search docs shipped with ``bfcl-eval==2026.3.23``;
`bfcl_tags(name)` returns ``(frozenset(), None)`` for a name it does not know.
"""

from __future__ import annotations

READ: tuple[str, ...] = ("read",)
WRITE: tuple[str, ...] = ("write",)
DESTRUCTIVE: tuple[str, ...] = ("write", "destructive")

#: function name -> (tags, target).  Grouped by backend class.
BFCL_TAGS: dict[str, tuple[tuple[str, ...], str | None]] = {
    # --- GorillaFileSystem (gorilla_file_system.json) ---
    "ls": (READ, None),
    "pwd": (READ, None),
    "cat": (READ, "file_name"),
    "grep": (READ, "file_name"),
    "find": (READ, "path"),
    "du": (READ, None),
    "diff": (READ, "file_name1"),
    "tail": (READ, "file_name"),
    "wc": (READ, "file_name"),
    "sort": (READ, "file_name"),
    "cd": (("navigate",), "folder"),
    "touch": (WRITE, "file_name"),
    "echo": (WRITE, "file_name"),
    "mkdir": (WRITE, "dir_name"),
    "cp": (WRITE, "destination"),
    "mv": (DESTRUCTIVE, "source"),
    "rm": (DESTRUCTIVE, "file_name"),
    "rmdir": (DESTRUCTIVE, "dir_name"),
    # --- MathAPI (math_api.json): pure functions ---
    **{
        name: (READ, None)
        for name in (
            "absolute_value",
            "add",
            "divide",
            "imperial_si_conversion",
            "logarithm",
            "max_value",
            "mean",
            "min_value",
            "multiply",
            "percentage",
            "power",
            "round_number",
            "si_unit_conversion",
            "square_root",
            "standard_deviation",
            "subtract",
            "sum_values",
        )
    },
    # --- MessageAPI (message_api.json) ---
    "message_login": (("auth", "write"), "user_id"),
    "message_get_login_status": (READ, None),
    "list_users": (READ, None),
    "get_user_id": (READ, "user"),
    "get_message_stats": (("read", "needs_auth"), None),
    "search_messages": (("read", "needs_auth"), None),
    "view_messages_sent": (("read", "needs_auth"), None),
    "add_contact": (WRITE, "user_name"),
    "send_message": (("write", "needs_auth"), "receiver_id"),
    "delete_message": (("write", "destructive", "needs_auth"), "receiver_id"),
    # --- TwitterAPI (posting_api.json) ---
    "authenticate_twitter": (("auth", "write"), "username"),
    "posting_get_login_status": (READ, None),
    "get_tweet": (READ, "tweet_id"),
    "get_tweet_comments": (READ, "tweet_id"),
    "get_user_stats": (READ, "username"),
    "get_user_tweets": (READ, "username"),
    "search_tweets": (READ, None),
    "list_all_following": (("read", "needs_auth"), None),
    "post_tweet": (("write", "needs_auth"), None),
    "comment": (("write", "needs_auth"), "tweet_id"),
    "mention": (WRITE, "tweet_id"),
    "retweet": (("write", "needs_auth"), "tweet_id"),
    "follow_user": (("write", "needs_auth"), "username_to_follow"),
    "unfollow_user": (("write", "destructive", "needs_auth"), "username_to_unfollow"),
    # --- TicketAPI (ticket_api.json) ---
    "ticket_login": (("auth", "write"), "username"),
    "logout": (("auth", "write"), None),
    "ticket_get_login_status": (READ, None),
    "get_ticket": (READ, "ticket_id"),
    "get_user_tickets": (("read", "needs_auth"), None),
    "create_ticket": (("write", "needs_auth"), None),
    "edit_ticket": (WRITE, "ticket_id"),
    "resolve_ticket": (WRITE, "ticket_id"),
    "close_ticket": (DESTRUCTIVE, "ticket_id"),
    # --- TradingBot (trading_bot.json) ---
    "trading_login": (("auth", "write"), "username"),
    "trading_logout": (("auth", "write", "needs_auth"), None),
    "trading_get_login_status": (READ, None),
    "get_current_time": (READ, None),
    "get_available_stocks": (READ, "sector"),
    "get_stock_info": (READ, "symbol"),
    "get_symbol_by_name": (READ, "name"),
    "filter_stocks_by_price": (READ, None),
    "notify_price_change": (READ, None),
    "get_account_info": (("read", "needs_auth"), None),
    "get_order_details": (READ, "order_id"),
    "get_order_history": (("read", "needs_auth"), None),
    "get_transaction_history": (("read", "needs_auth"), None),
    "get_watchlist": (("read", "needs_auth"), None),
    "add_to_watchlist": (WRITE, "stock"),
    "fund_account": (("write", "needs_auth"), None),
    "place_order": (("write", "needs_auth"), "symbol"),
    "cancel_order": (DESTRUCTIVE, "order_id"),
    "remove_stock_from_watchlist": (("write", "destructive", "needs_auth"), "symbol"),
    "withdraw_funds": (("write", "destructive", "needs_auth"), None),
    # --- TravelAPI (travel_booking.json); the access token comes from authenticate_travel ---
    "authenticate_travel": (("auth", "write"), None),
    "travel_get_login_status": (READ, None),
    "list_all_airports": (READ, None),
    "get_nearest_airport_by_city": (READ, "location"),
    "get_flight_cost": (READ, None),
    "compute_exchange_rate": (READ, None),
    "get_budget_fiscal_year": (READ, None),
    "get_all_credit_cards": (READ, None),
    "get_credit_card_balance": (("read", "needs_auth"), "card_id"),
    "get_booking_history": (("read", "needs_auth"), None),
    "retrieve_invoice": (("read", "needs_auth"), "booking_id"),
    "verify_traveler_information": (("verify",), None),
    "register_credit_card": (("write", "needs_auth"), "card_number"),
    "set_budget_limit": (("write", "needs_auth"), None),
    "book_flight": (("write", "needs_auth"), None),
    "purchase_insurance": (("write", "needs_auth"), "booking_id"),
    "contact_customer_support": (WRITE, "booking_id"),
    "cancel_booking": (("write", "destructive", "needs_auth"), "booking_id"),
    # --- VehicleControlAPI (vehicle_control.json) ---
    "check_tire_pressure": (READ, None),
    "displayCarStatus": (READ, "option"),
    "display_log": (READ, None),
    "estimate_distance": (READ, None),
    "estimate_drive_feasibility_by_mileage": (READ, None),
    "find_nearest_tire_shop": (READ, None),
    "gallon_to_liter": (READ, None),
    "liter_to_gallon": (READ, None),
    "get_current_speed": (READ, None),
    "get_outside_temperature_from_google": (READ, None),
    "get_outside_temperature_from_weather_com": (READ, None),
    "get_zipcode_based_on_city": (READ, "city"),
    "activateParkingBrake": (WRITE, None),
    "adjustClimateControl": (WRITE, None),
    "fillFuelTank": (WRITE, None),
    "lockDoors": (WRITE, None),
    "pressBrakePedal": (WRITE, None),
    "releaseBrakePedal": (WRITE, None),
    "setCruiseControl": (WRITE, None),
    "setHeadlights": (WRITE, None),
    "set_navigation": (WRITE, "destination"),
    "startEngine": (WRITE, None),
    # --- memory (memory_kv / memory_vector / memory_rec_sum.json) and web search ---
    **{
        f"{tier}_memory_{op}": (op_tags, None)
        for tier in ("core", "archival")
        for op, op_tags in (
            ("add", WRITE),
            ("replace", WRITE),
            ("update", WRITE),
            ("clear", DESTRUCTIVE),
            ("remove", DESTRUCTIVE),
            ("retrieve", READ),
            ("retrieve_all", READ),
            ("key_search", READ),
            ("list_keys", READ),
        )
    },
    "memory_append": (WRITE, None),
    "memory_update": (WRITE, None),
    "memory_replace": (WRITE, None),
    "memory_clear": (DESTRUCTIVE, None),
    "memory_retrieve": (READ, None),
    "search_engine_query": (READ, None),
    "fetch_url_content": (READ, "url"),
}


def bfcl_tags(name: str) -> tuple[frozenset[str], str | None]:
    """The tags and target of the BFCL function `name` (empty tags and None when unknown)."""
    tags, target = BFCL_TAGS.get(name, ((), None))
    return frozenset(tags), target


#: The progress signal of the BFCL environment (`trainer.envs.bfcl`): the leading user turns that
#: passed BFCL's checks (`BFCL_SIGNAL_DESCRIPTION`).  A `bfcl` manifest declares it (kind ``progress``,
#: increasing), with the two per-call flags below, so `--auto-from-tags` derives rules from all three.
BFCL_SIGNAL = "turns_matched"
#: What the signal counts (trainer.envs.bfcl.checker.TaskChecker computes it).
BFCL_SIGNAL_DESCRIPTION = (
    "user turns passed so far by BFCL's checks (state equal to the ground truth's, its results returned, "
    "a call made when one was needed), counted from the first turn until one fails; the current turn "
    "counts while its calls so far would pass it"
)

#: The environment's per-call ``violation`` flag (`trainer.envs.bfcl.env.OFF_PATH`, the same name; the
#: language core does not import the trainer): 1 when the call left the ground truth's path in its turn.
BFCL_VIOLATION_SIGNAL = "off_path"
#: What `BFCL_VIOLATION_SIGNAL` says (trainer.envs.bfcl.checker.TaskChecker.off_path computes it).
BFCL_VIOLATION_SIGNAL_DESCRIPTION = (
    "1 when the call left the ground truth's path in its user turn: its result is none of the turn's "
    "ground-truth results, or the state after it none of the ground truth's states in the turn; judged "
    "only while every earlier turn passed (0 after a failed turn)"
)
#: The environment's per-call ``done`` flag (`trainer.envs.bfcl.env.TURN_PASSING`, the same name).
BFCL_DONE_SIGNAL = "turn_passing"
#: What `BFCL_DONE_SIGNAL` says (trainer.envs.bfcl.checker.TaskChecker.passing_now computes it).
BFCL_DONE_SIGNAL_DESCRIPTION = (
    "1 when the current user turn would pass BFCL's checks if the agent answered after this call "
    "(every earlier turn passed, the state equals the ground truth's, its results returned); never 1 "
    "in a turn whose ground truth has no call"
)
