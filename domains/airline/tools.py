"""Airline agent tools over the copy-on-write DB (plain dicts).

Behaviour follows the reference toolkit step by step -- check order, error texts, integer/float
arithmetic, the point where a failing call stops (earlier mutations persist) -- so outputs and hashes
match. Where the reference builds a pydantic model from arguments (flight infos, passengers, payments,
the new reservation, certificates) the same-named model here is built the same way, so validation,
coercion and error texts agree; where it assigns raw arguments into a record, so do we. Everything else
is dict work on the episode's copy-on-write DB; a booking makes private only the booked flight date, not
the flight's 30 dates (tools change nothing of a flight but its seat counts).
"""

from __future__ import annotations

from typing import List, Optional, cast

from tau2_gym.core import arithmetic
from tau2_gym.core.db import copy_json
from tau2_gym.core.tools import AsModel, Toolkit, ToolType, tool
from tau2_gym.domains.airline.data_model import (
    CabinClass,
    Certificate,
    FlightInfo,
    FlightType,
    Insurance,
    Passenger,
    Payment,
    Reservation,
)

NOW = "2024-05-15T15:00:00"  # the benchmark's frozen clock (created_at of new reservations)
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_NUMBERS = (3221322, 3221323, 3221324)
AIRPORTS = (
    ("SFO", "San Francisco"),
    ("JFK", "New York"),
    ("LAX", "Los Angeles"),
    ("ORD", "Chicago"),
    ("DFW", "Dallas"),
    ("DEN", "Denver"),
    ("SEA", "Seattle"),
    ("ATL", "Atlanta"),
    ("MIA", "Miami"),
    ("BOS", "Boston"),
    ("PHX", "Phoenix"),
    ("IAH", "Houston"),
    ("LAS", "Las Vegas"),
    ("MCO", "Orlando"),
    ("EWR", "Newark"),
    ("CLT", "Charlotte"),
    ("MSP", "Minneapolis"),
    ("DTW", "Detroit"),
    ("PHL", "Philadelphia"),
    ("LGA", "LaGuardia"),
)


def _all_dicts(items) -> bool:
    """The reference converts a list argument to models only when every element is a dict (empty: yes)."""
    return all(isinstance(item, dict) for item in items)


def _direct_flight(flight: dict, day: dict, date: Optional[str] = None) -> dict:
    """A search result in DirectFlight dump order (own seat/price dicts, as the model's copies)."""
    return {
        "flight_number": flight["flight_number"],
        "origin": flight["origin"],
        "destination": flight["destination"],
        "status": "available",
        "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
        "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
        "date": date,
        "available_seats": dict(day["available_seats"]),
        "prices": dict(day["prices"]),
    }


def _segment(flight_number: str, flight: dict, date: str, price: int) -> dict:
    """A reservation segment in ReservationFlight dump order; the route comes from the flight record."""
    return {
        "flight_number": flight_number,
        "origin": flight["origin"],
        "destination": flight["destination"],
        "date": date,
        "price": price,
    }


class AirlineTools(Toolkit):
    """Agent toolkit of the airline domain (the class name shows in argument errors, as upstream's)."""

    # ------------------------------------------------------------------ lookups (reference texts)

    def _get_user(self, user_id) -> dict:
        users = self.db.users
        if user_id not in users:
            raise ValueError(f"User {user_id} not found")
        return users[user_id]

    def _get_reservation(self, reservation_id) -> dict:
        reservations = self.db.reservations
        if reservation_id not in reservations:
            raise ValueError(f"Reservation {reservation_id} not found")
        return reservations[reservation_id]

    def _get_flight(self, flight_number) -> dict:
        flights = self.db.flights
        if flight_number not in flights:
            raise ValueError(f"Flight {flight_number} not found")
        return flights[flight_number]

    def _get_flight_instance(self, flight_number, date) -> dict:
        dates = self._get_flight(flight_number)["dates"]
        if date not in dates:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return dates[date]

    def _new_reservation_id(self) -> str:
        reservations = self.db.reservations
        for reservation_id in NEW_RESERVATION_IDS:
            if reservation_id not in reservations:
                return reservation_id
        raise ValueError("Too many reservations")

    def _search_direct_flight(self, date, origin=None, destination=None, leave_after=None) -> list[tuple]:
        """Matching (flight, day) pairs in DB order, the reference's conditions in its order: ``date in
        dates`` only runs for a route match, so an unhashable date fails only then."""
        matches = []
        for flight in self.db.flights.values():
            if (
                (origin is None or flight["origin"] == origin)
                and (destination is None or flight["destination"] == destination)
                and (date in flight["dates"])
                and (flight["dates"][date]["status"] == "available")
                and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)
            ):
                matches.append((flight, flight["dates"][date]))
        return matches

    def _seats_to_change(self, flight_number: str, date: str) -> dict:
        """The seat counts of one flight date, made private to this episode.

        A flight record holds 30 dates; only the booked date is copied (the record's spine is copied
        too, other dates stay shared with the base). This is the only place flights are mutated, so a
        private flight record may keep sharing its untouched dates.
        """
        table = self.db.flights
        record = table[flight_number]
        base_record = self.db.base.data["flights"].get(flight_number)
        if record is base_record:
            record = dict(record)
            record["dates"] = dict(record["dates"])
            table[flight_number] = record
        day = record["dates"][date]
        if base_record is not None and day is base_record["dates"].get(date):
            day = copy_json(day)
            record["dates"][date] = day
        return day["available_seats"]

    def _payment_for_update(self, user_id: str, user: dict, payment_id, total_price) -> Optional[dict]:
        """Charge (or refund, if negative) an update; the gift card moves before the record is built."""
        methods = user["payment_methods"]
        if payment_id not in methods:
            raise ValueError("Payment method not found")
        method = methods[payment_id]
        source = method["source"]
        if source == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        elif source == "gift_card" and method["amount"] < total_price:
            raise ValueError("Gift card balance is not enough")
        if source == "gift_card":
            self.db.users.mut(user_id)["payment_methods"][payment_id]["amount"] -= total_price
        if total_price != 0:
            return Payment(payment_id=payment_id, amount=total_price).model_dump()
        return None

    # ------------------------------------------------------------------ tools (reference order)

    @tool(ToolType.WRITE)
    def book_reservation(
        self,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: FlightType,
        cabin: CabinClass,
        flights: List[FlightInfo | dict],
        passengers: List[Passenger | dict],
        payment_methods: List[Payment | dict],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: Insurance,
    ):
        """Book a new reservation for a user and charge its payment methods.

        Args:
            user_id: Who books.
            origin: Trip origin code.
            destination: Trip destination code.
            flight_type: one_way or round_trip.
            cabin: Cabin for every segment.
            flights: Segments (flight number and date).
            passengers: Travellers.
            payment_methods: Payment ids and amounts.
            total_baggages: Checked bags.
            nonfree_baggages: Paid checked bags.
            insurance: yes or no.
        """
        if _all_dicts(flights):
            flights = [FlightInfo(**f) for f in flights]
        if _all_dicts(passengers):
            passengers = [Passenger(**p) for p in passengers]
        if _all_dicts(payment_methods):
            payment_methods = [Payment(**p) for p in payment_methods]
        user = self._get_user(user_id)
        reservation_id = self._new_reservation_id()
        # The reference deep-copies the argument lists first; dumping the model right away isolates
        # the stored record just as well.
        reservation = Reservation(
            reservation_id=reservation_id,
            user_id=user_id,
            origin=origin,
            destination=destination,
            flight_type=flight_type,
            cabin=cabin,
            flights=[],
            passengers=passengers,
            payment_history=payment_methods,
            created_at=NOW,
            total_baggages=total_baggages,
            nonfree_baggages=nonfree_baggages,
            insurance=insurance,
        ).model_dump()

        # models from here on: a list that mixed dicts and models fails on its first dict, as upstream's does
        total_price = 0
        segments = []
        for flight_info in cast("list[FlightInfo]", flights):
            flight_number = flight_info.flight_number
            flight = self._get_flight(flight_number)
            day = self._get_flight_instance(flight_number, flight_info.date)
            if day["status"] != "available":
                raise ValueError(f"Flight {flight_number} not available on date {flight_info.date}")
            if day["available_seats"][cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {flight_number}")
            price = day["prices"][cabin]
            segments.append(_segment(flight_number, flight, flight_info.date, price))
            total_price += price * len(passengers)

        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages

        methods = user["payment_methods"]
        for payment in cast("list[Payment]", payment_methods):
            payment_id = payment.payment_id
            amount = payment.amount
            if payment_id not in methods:
                raise ValueError(f"Payment method {payment_id} not found")
            method = methods[payment_id]
            if method["source"] in {"gift_card", "certificate"}:
                if method["amount"] < amount:
                    raise ValueError(f"Not enough balance in payment method {payment_id}")

        total_payment = sum(payment.amount for payment in cast("list[Payment]", payment_methods))
        if total_payment != total_price:
            raise ValueError(f"Payment amount does not add up, total price is {total_price}, but paid {total_payment}")

        # Checks passed: charge. A certificate listed twice fails on its second lookup, after the
        # earlier charges (as in the reference).
        user = self.db.users.mut(user_id)
        methods = user["payment_methods"]
        for payment in cast("list[Payment]", payment_methods):
            payment_id = payment.payment_id
            method = methods[payment_id]
            if method["source"] == "gift_card":
                method["amount"] -= payment.amount
            elif method["source"] == "certificate":
                methods.pop(payment_id)

        n = len(passengers)
        for seg in segments:
            self._seats_to_change(seg["flight_number"], seg["date"])[cabin] -= n
        reservation["flights"] = segments
        self.db.reservations[reservation_id] = reservation
        user["reservations"].append(reservation_id)
        return AsModel(reservation)

    @tool(ToolType.GENERIC)
    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression, rounded to 2 decimals.

        Args:
            expression: Numbers, + - * /, parentheses and spaces.
        """
        return arithmetic.calculate(expression)

    @tool(ToolType.WRITE)
    def cancel_reservation(self, reservation_id: str):
        """Cancel a reservation: every payment so far is refunded by a negative entry.

        Args:
            reservation_id: Reservation to cancel.
        """
        self._get_reservation(reservation_id)
        reservation = self.db.reservations.mut(reservation_id)
        history = reservation["payment_history"]
        history.extend([{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in history])
        reservation["status"] = "cancelled"
        return AsModel(reservation)

    @tool(ToolType.READ)
    def get_reservation_details(self, reservation_id: str):
        """Show a reservation.

        Args:
            reservation_id: Reservation id.
        """
        return AsModel(self._get_reservation(reservation_id))

    @tool(ToolType.READ)
    def get_user_details(self, user_id: str):
        """Show a user's profile, payment methods and reservation ids.

        Args:
            user_id: User id.
        """
        return AsModel(self._get_user(user_id))

    @tool(ToolType.READ)
    def list_all_airports(self):
        """List the airports served."""
        return AsModel([{"iata": iata, "city": city} for iata, city in AIRPORTS])

    @tool(ToolType.READ)
    def search_direct_flight(self, origin: str, destination: str, date: str):
        """Bookable nonstop flights for a route and date.

        Args:
            origin: Departure airport code.
            destination: Arrival airport code.
            date: Travel date, YYYY-MM-DD.
        """
        matches = self._search_direct_flight(date=date, origin=origin, destination=destination)
        return AsModel([_direct_flight(flight, day) for flight, day in matches])

    @tool(ToolType.READ)
    def search_onestop_flight(self, origin: str, destination: str, date: str):
        """Bookable one-connection itineraries for a route and date.

        Args:
            origin: Departure airport code.
            destination: Arrival airport code.
            date: Travel date, YYYY-MM-DD.
        """
        # Reference quirks kept: the next-day date hard-codes May and is not zero-padded, and the
        # connection test compares time strings (so "+1" arrivals compare as text).
        results = []
        for flight1, day1 in self._search_direct_flight(date=date, origin=origin, destination=None):
            first = _direct_flight(flight1, day1, date)
            arrival = first["scheduled_arrival_time_est"]
            date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in arrival else date
            for flight2, day2 in self._search_direct_flight(
                date=date2, origin=first["destination"], destination=destination, leave_after=arrival
            ):
                results.append([first, _direct_flight(flight2, day2, date2)])
        return AsModel(results)

    @tool(ToolType.WRITE)
    def send_certificate(self, user_id: str, amount: int) -> str:
        """Give a user a travel certificate.

        Args:
            user_id: Recipient.
            amount: Certificate value.
        """
        user = self._get_user(user_id)
        for number in NEW_CERTIFICATE_NUMBERS:
            payment_id = f"certificate_{number}"
            if payment_id not in user["payment_methods"]:
                certificate = Certificate(id=payment_id, amount=amount, source="certificate").model_dump()
                self.db.users.mut(user_id)["payment_methods"][payment_id] = certificate
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    @tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:  # noqa: ARG002 - upstream's tool signature
        """Hand the conversation to a human agent.

        Args:
            summary: What the user needs.
        """
        return "Transfer successful"

    @tool(ToolType.WRITE)
    def update_reservation_baggages(
        self, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
    ):
        """Change a reservation's bag counts, charging new paid bags.

        Args:
            reservation_id: Reservation id.
            total_baggages: New checked bags.
            nonfree_baggages: New paid bags.
            payment_id: Saved payment method to charge.
        """
        reservation = self._get_reservation(reservation_id)
        user_id = reservation["user_id"]
        user = self._get_user(user_id)
        total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        payment = self._payment_for_update(user_id, user, payment_id, total_price)
        reservation = self.db.reservations.mut(reservation_id)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["total_baggages"] = copy_json(total_baggages)  # raw, as the reference assigns it
        reservation["nonfree_baggages"] = copy_json(nonfree_baggages)
        return AsModel(reservation)

    @tool(ToolType.WRITE)
    def update_reservation_flights(
        self, reservation_id: str, cabin: CabinClass, flights: List[FlightInfo | dict], payment_id: str
    ):
        """Replace a reservation's itinerary and/or cabin, settling the fare difference.

        Args:
            reservation_id: Reservation id.
            cabin: Cabin for the whole itinerary.
            flights: The complete new itinerary, unchanged segments included.
            payment_id: Saved payment method for the difference.
        """
        if _all_dicts(flights):
            flights = [FlightInfo(**f) for f in flights]
        reservation = self._get_reservation(reservation_id)
        user_id = reservation["user_id"]
        user = self._get_user(user_id)
        old_segments = reservation["flights"]
        passengers = reservation["passengers"]

        total_price = 0
        segments = []
        for flight_info in cast("list[FlightInfo]", flights):  # (a mixed list fails here, as upstream's does)
            kept = next(
                (
                    seg
                    for seg in old_segments
                    if seg["flight_number"] == flight_info.flight_number
                    and seg["date"] == flight_info.date
                    and cabin == reservation["cabin"]
                ),
                None,
            )
            if kept:
                total_price += kept["price"] * len(passengers)
                segments.append(dict(kept))
                continue
            flight = self._get_flight(flight_info.flight_number)
            day = self._get_flight_instance(flight_info.flight_number, flight_info.date)
            if day["status"] != "available":
                raise ValueError(f"Flight {flight_info.flight_number} not available on date {flight_info.date}")
            if day["available_seats"][cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {flight_info.flight_number}")
            seg = _segment(flight_info.flight_number, flight, flight_info.date, day["prices"][cabin])
            total_price += seg["price"] * len(passengers)
            segments.append(seg)

        total_price -= sum(seg["price"] for seg in old_segments) * len(passengers)

        payment = self._payment_for_update(user_id, user, payment_id, total_price)
        reservation = self.db.reservations.mut(reservation_id)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["flights"] = segments
        reservation["cabin"] = copy_json(cabin)  # raw: an invalid cabin is stored as given
        return AsModel(reservation)

    @tool(ToolType.WRITE)
    def update_reservation_passengers(self, reservation_id: str, passengers: List[Passenger | dict]):
        """Replace a reservation's passenger details (same count).

        Args:
            reservation_id: Reservation id.
            passengers: The full new passenger list.
        """
        converted = _all_dicts(passengers)
        if converted:
            passengers = [Passenger(**p) for p in passengers]
        reservation = self._get_reservation(reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            raise ValueError("Number of passengers does not match")
        reservation = self.db.reservations.mut(reservation_id)
        reservation["passengers"] = (
            [p.model_dump() for p in cast("list[Passenger]", passengers)] if converted else copy_json(passengers)
        )
        return AsModel(reservation)

    @tool(ToolType.READ)
    def get_flight_status(self, flight_number: str, date: str) -> str:
        """Status of a flight on a date.

        Args:
            flight_number: Flight number.
            date: Date, YYYY-MM-DD.
        """
        return self._get_flight_instance(flight_number, date)["status"]
