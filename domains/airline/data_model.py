"""Airline DB models. Names, field order, types, optionality and config are the contract: they fix the
dump (and so the hash), pydantic's validation texts, and -- through the schema twins -- the tool schemas.

Only the DB load and the few places where the reference builds a model from tool arguments use these
classes; the tools themselves work on the plain-dict dump.
"""

from typing import Annotated, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

FlightType = Literal["round_trip", "one_way"]
CabinClass = Literal["business", "economy", "basic_economy"]
Insurance = Literal["yes", "no"]

MembershipLevel = Annotated[Literal["gold", "silver", "regular"], Field(description="Loyalty tier.")]


class AirportCode(BaseModel):
    iata: str = Field(description="Three-letter airport code.")
    city: str = Field(description="City served.")


AirportInfo = Annotated[list[AirportCode], Field(description="The airports.")]


class Name(BaseModel):
    first_name: str = Field(description="Given name.")
    last_name: str = Field(description="Family name.")


class Address(BaseModel):
    address1: str = Field(description="Street line.")
    address2: Optional[str] = Field(None, description="Second line, if any.")
    city: str = Field(description="City.")
    country: str = Field(description="Country.")
    state: str = Field(description="State or province.")
    zip: str = Field(description="Postal code.")


class Payment(BaseModel):
    payment_id: str = Field(description="Payment method id.")
    amount: int = Field(description="Whole dollars (negative for refunds).")


class PaymentMethodBase(BaseModel):
    # each payment kind narrows `source` to its tag (a discriminated union, as upstream's models are)
    source: str = Field(description="Kind of payment method.")
    id: str = Field(description="Payment method id.")


class CreditCard(PaymentMethodBase):
    source: Literal["credit_card"] = Field(description="Marks a credit card.")  # ty: ignore[incompatible-mutable-override] - the tag
    brand: str = Field(description="Card network.")
    last_four: str = Field(description="Last four digits.")


class GiftCard(PaymentMethodBase):
    source: Literal["gift_card"] = Field(description="Marks a gift card.")  # ty: ignore[incompatible-mutable-override] - the tag
    amount: float = Field(description="Remaining balance.")
    id: str = Field(description="Payment method id.")


class Certificate(PaymentMethodBase):
    source: Literal["certificate"] = Field(description="Marks a travel certificate.")  # ty: ignore[incompatible-mutable-override] - the tag
    amount: float = Field(description="Certificate value.")


PaymentMethod = Union[CreditCard, GiftCard, Certificate]


class Passenger(BaseModel):
    first_name: str = Field(description="Given name.")
    last_name: str = Field(description="Family name.")
    dob: str = Field(description="Birth date, YYYY-MM-DD.")


SeatPrices = Annotated[dict[CabinClass, int], Field(description="Fare per cabin.")]
AvailableSeats = Annotated[dict[CabinClass, int], Field(description="Free seats per cabin.")]


class FlightDateStatusAvailable(BaseModel):
    status: Literal["available"] = Field(description="Bookable.")
    available_seats: AvailableSeats = Field(description="Free seats per cabin.")
    prices: SeatPrices = Field(description="Fare per cabin.")


class FlightDataStatusOnTime(BaseModel):
    status: Literal["on time"] = Field(description="Not departed, on schedule.")
    estimated_departure_time_est: str = Field(description="Expected departure, EST timestamp.")
    estimated_arrival_time_est: str = Field(description="Expected arrival, EST timestamp.")


class FlightDataStatusFlying(BaseModel):
    status: Literal["flying"] = Field(description="In the air.")
    actual_departure_time_est: str = Field(description="Departure, EST timestamp.")
    estimated_arrival_time_est: str = Field(description="Expected arrival, EST timestamp.")


class FlightDateStatusLanded(BaseModel):
    status: Literal["landed"] = Field(description="Arrived.")
    actual_departure_time_est: str = Field(description="Departure, EST timestamp.")
    actual_arrival_time_est: str = Field(description="Arrival, EST timestamp.")


class FlightDateStatusCancelled(BaseModel):
    status: Literal["cancelled"] = Field(description="Will not fly.")


class FlightDateStatusDelayed(BaseModel):
    status: Literal["delayed"] = Field(description="Not departed, late.")
    estimated_departure_time_est: str = Field(description="Expected departure, EST timestamp.")
    estimated_arrival_time_est: str = Field(description="Expected arrival, EST timestamp.")


FlightDateStatus = Union[
    FlightDateStatusAvailable,
    FlightDateStatusLanded,
    FlightDateStatusCancelled,
    FlightDateStatusDelayed,
    FlightDataStatusFlying,
    FlightDataStatusOnTime,
]


class FlightBase(BaseModel):
    flight_number: str = Field(description="Flight number.")
    origin: str = Field(description="Departure airport code.")
    destination: str = Field(description="Arrival airport code.")


class Flight(FlightBase):
    scheduled_departure_time_est: str = Field(description="Departure time of day, EST.")
    scheduled_arrival_time_est: str = Field(description="Arrival time of day, EST (may end in +1).")
    dates: Dict[str, FlightDateStatus] = Field(description="Status per date.")


class DirectFlight(FlightBase):
    status: Literal["available"] = Field(description="Bookable.")
    scheduled_departure_time_est: str = Field(description="Departure time of day, EST.")
    scheduled_arrival_time_est: str = Field(description="Arrival time of day, EST.")
    date: Optional[str] = Field(description="Travel date, when known.", default=None)
    available_seats: AvailableSeats = Field(description="Free seats per cabin.")
    prices: SeatPrices = Field(description="Fare per cabin.")


class ReservationFlight(FlightBase):
    date: str = Field(description="Travel date.")
    price: int = Field(description="Fare paid per passenger.")


class FlightInfo(BaseModel):
    flight_number: str = Field(description="Flight number.")
    date: str = Field(description="Travel date.")


class User(BaseModel):
    user_id: str = Field(description="User id.")
    name: Name = Field(description="Full name.")
    address: Address = Field(description="Postal address.")
    email: str = Field(description="Email address.")
    dob: str = Field(description="Birth date.")
    payment_methods: Dict[str, PaymentMethod] = Field(description="Saved payment methods by id.")
    saved_passengers: List[Passenger] = Field(description="Frequent co-travellers.")
    membership: MembershipLevel = Field(description="Loyalty tier.")
    reservations: List[str] = Field(description="Reservation ids.")


class Reservation(BaseModel):
    reservation_id: str = Field(description="Reservation id.")
    user_id: str = Field(description="Owner.")
    origin: str = Field(description="Trip origin code.")
    destination: str = Field(description="Trip destination code.")
    flight_type: FlightType = Field(description="One way or round trip.")
    cabin: CabinClass = Field(description="Cabin of every segment.")
    flights: List[ReservationFlight] = Field(description="Segments.")
    passengers: List[Passenger] = Field(description="Travellers.")
    payment_history: List[Payment] = Field(description="Payments and refunds, in order.")
    created_at: str = Field(description="Booking time, EST timestamp.")
    total_baggages: int = Field(description="Checked bags.")
    nonfree_baggages: int = Field(description="Paid checked bags.")
    insurance: Insurance = Field(description="Travel insurance bought.")
    status: Optional[Literal["cancelled"]] = Field(description="Set when cancelled.", default=None)


class FlightDB(BaseModel):
    """Flights, users and reservations, each keyed by id."""

    model_config = ConfigDict(extra="forbid")

    flights: Dict[str, Flight] = Field(description="Flights by number.")
    users: Dict[str, User] = Field(description="Users by id.")
    reservations: Dict[str, Reservation] = Field(description="Reservations by id.")
